#include "backend/cuda/gemm.h"

#include <algorithm>
#include <limits>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "core/error.h"

namespace ts::cuda {
namespace {

// Chunks of a larger weight are cut into equal parts of whole 128-row GEMM tiles.
constexpr int64_t kChunkRowAlign = 128;

int as_int(int64_t v, const char* what) {
  if (v > std::numeric_limits<int>::max())
    fail(ErrorKind::Unsupported, std::string("matmul: ") + what + " of " + std::to_string(v) +
                                     " exceeds cuBLAS's 32-bit dimensions");
  return static_cast<int>(v);
}

}  // namespace

int64_t Gemm::dequant_chunk_rows(int64_t rows, int64_t cols) {
  const int64_t max_rows = std::clamp<int64_t>(kDequantElems / cols, 1, 65535);
  const int64_t chunks = (rows + max_rows - 1) / max_rows;
  const int64_t even = (rows + chunks - 1) / chunks;
  const int64_t aligned = (even + kChunkRowAlign - 1) / kChunkRowAlign * kChunkRowAlign;
  return std::min(aligned <= max_rows ? aligned : even, rows);
}

uint64_t Gemm::acts_bytes(const MatmulShape& w, int64_t M) {
  return M <= 1 || w.dtype == DType::F32 ? 0 : static_cast<uint64_t>(M * w.cols) * 2;
}

uint64_t Gemm::dequant_bytes(const MatmulShape& w) {
  if (w.dtype == DType::F32 || w.dtype == DType::F16 || w.dtype == DType::BF16) return 0;
  return static_cast<uint64_t>(dequant_chunk_rows(w.rows, w.cols) * w.cols) * 2;
}

Gemm::Gemm(cudaStream_t stream)
    : stream_(stream), workspace_(stream), acts_(stream), weights_(stream) {
  check(cublasCreate(&handle_), "cublasCreate");
  check(cublasSetStream(handle_, stream_), "cublasSetStream");
  check(cublasSetWorkspace(handle_, workspace_.get(kWorkspaceBytes, "cuBLAS workspace"),
                           kWorkspaceBytes),
        "cublasSetWorkspace");
}

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

void Gemm::run(const Weight& w, const float* x, int64_t M, float* y) {
  note_launch();  // cuBLAS's kernels are work on the stream too (pdl.cuh)
  // Column-major view: y^T (rows x M, ld rows) = W (cols x rows, ld = row elements)^T * x^T.
  const int n = as_int(w.rows, "rows"), m = as_int(M, "activation rows"),
            k = as_int(w.cols, "cols");
  const float one = 1.0f, zero = 0.0f;
  if (w.dtype == DType::F32) {
    const int lda = as_int(static_cast<int64_t>(w.row_stride / 4), "row stride");
    check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w.data, CUDA_R_32F, lda, x,
                       CUDA_R_32F, k, &zero, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_PEDANTIC,
                       CUBLAS_GEMM_DEFAULT),
          "f32 GEMM");
    return;
  }
  const bool bf16 = w.dtype == DType::BF16;
  const DType act_type = bf16 ? DType::BF16 : DType::F16;
  const cudaDataType_t ctype = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  void* xa = acts_.get(static_cast<size_t>(M * w.cols) * 2, "matmul activations");
  launch_convert_f32(x, M * w.cols, act_type, xa, stream_);
  if (w.dtype == DType::F16 || bf16) {
    const int lda = as_int(static_cast<int64_t>(w.row_stride / 2), "row stride");
    check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w.data, ctype, lda, xa,
                       ctype, k, &zero, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "16-bit GEMM");
    return;
  }
  const int64_t chunk = dequant_chunk_rows(w.rows, w.cols);
  void* wd = dequant_scratch(static_cast<size_t>(chunk * w.cols) * 2);
  for (int64_t r0 = 0; r0 < w.rows; r0 += chunk) {
    const int64_t r1 = std::min(w.rows, r0 + chunk);
    launch_dequant_rows_f16(w, r0, r1, wd, stream_);
    check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(r1 - r0), m, k, &one, wd,
                       CUDA_R_16F, k, xa, CUDA_R_16F, k, &zero, y + r0, CUDA_R_32F, n,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "dequantised GEMM");
  }
}

void* Gemm::dequant_scratch(size_t bytes) {
  if (bytes > static_cast<size_t>(kDequantElems) * 2)
    fail(ErrorKind::Runtime, "internal: " + std::to_string(bytes) +
                                 " bytes of dequantised weights exceed the GEMM's scratch");
  return weights_.get(bytes, "dequantised weight rows");
}

}  // namespace ts::cuda
