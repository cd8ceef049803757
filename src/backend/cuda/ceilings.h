// The device's ceilings for `turbospark bench --roofline` (Backend::measure_ceilings).
#pragma once

#include <cuda_runtime_api.h>

#include "backend/backend.h"

namespace ts::cuda {

// Best of several device-to-device copies of 1 GiB (read + write bytes / time), and best of
// several cuBLAS bf16 GEMMs of 8192^3 with f32 accumulation (2 n^3 / time), timed with events.
DeviceCeilings measure_ceilings(cudaStream_t stream);

}  // namespace ts::cuda
