// The CUDA backend: buffers in device memory (plain cudaMalloc), every op of backend.h as kernels
// on one stream, cuBLAS for matmuls of several rows. A plain C++ header: callers need no CUDA.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace ts {

// These are implemented by backend/cuda_loader.cpp, which loads the plugin libturbospark_cuda.so
// (built from this folder) on first use.
// True when the plugin loads and the CUDA runtime sees at least one device.
bool cuda_device_available();
// The devices the CUDA runtime sees; 0 when the plugin does not load (*why then says why).
int cuda_device_count(std::string* why = nullptr);

// The backend on device `device`; fails (ErrorKind::Usage) when there is no such device.
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace ts
