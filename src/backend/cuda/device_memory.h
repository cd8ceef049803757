// Device memory the CUDA backend holds: its every cudaMalloc and cudaFree goes through here, so
// that a run can report its peak beside the footprint it announced at open.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ts::cuda {

// cudaMalloc / cudaFree, counted (a failed allocation counts nothing).
cudaError_t device_malloc(void** p, size_t bytes);
cudaError_t device_free(void* p);

// The most bytes held at once since the process started.
uint64_t device_peak_bytes();

}  // namespace ts::cuda
