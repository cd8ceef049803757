// CUDA and cuBLAS status codes turned into ts::fail (ErrorKind::Runtime) with the library's own
// error string and the operation that failed.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

namespace ts::cuda {

void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);

}  // namespace ts::cuda
