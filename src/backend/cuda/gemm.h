// Matmul of M > 1 activation rows (and of weights the GEMV kernels can't take) through cuBLAS:
// f32 weights in full f32 (no TF32: f32 models are tested against PyTorch at 1e-4); f16 / bf16
// weights on the tensor cores with the activations rounded to the weight's type and f32
// accumulation; block-quantised weights dequantised to f16 in chunks of rows, then the f16 GEMM.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/device_buffer.h"

namespace ts::cuda {

class Gemm {
 public:
  explicit Gemm(cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // y[m][r] = dot(w row r, x[m]) for m < M; x is [M][w.cols], y is [M][w.rows].
  void run(const Weight& w, const float* x, int64_t M, float* y);

  // cuBLAS's own workspace; handed over once so that it never allocates behind our back.
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  // Rows of a quantised weight dequantised per GEMM.
  static int64_t dequant_chunk_rows(int64_t rows, int64_t cols);
  // The scratch run() takes for M rows times `w`, beside the workspace: its 16-bit activations,
  // and its dequantised rows (0 for f32 / f16 / bf16 weights). Each buffer grows to its largest.
  static uint64_t acts_bytes(const MatmulShape& w, int64_t M);
  static uint64_t dequant_bytes(const MatmulShape& w);

  // Dequantised f16 elements per GEMM at most: 64 Mi (128 MiB) bounds the scratch whatever the
  // weight and holds every projection of an 8B-class model whole (one GEMM, no partial waves).
  static constexpr int64_t kDequantElems = int64_t{64} << 20;
  // The scratch run() dequantises weights into (at most kDequantElems f16 values), for other
  // work of the same stream between GEMMs (matmul_grouped's dequantised experts).
  void* dequant_scratch(size_t bytes);

 private:
  cudaStream_t stream_;
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer acts_;     // activations in f16 / bf16
  DeviceBuffer weights_;  // a chunk of dequantised weight rows
};

}  // namespace ts::cuda
