#include "backend/cuda/cuda_check.h"

#include <string>

#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace ts::cuda {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    fail(ErrorKind::Runtime, std::string("CUDA ") + what + ": " + cudaGetErrorString(status));
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(ErrorKind::Runtime, std::string("cuBLAS ") + what + ": " + cublasGetStatusString(status));
}

void check_launch(const char* what) {
  check(cudaGetLastError(), what);
}

}  // namespace ts::cuda
