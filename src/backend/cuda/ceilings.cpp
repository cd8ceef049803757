#include "backend/cuda/ceilings.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_check.h"

namespace ts::cuda {
namespace {

constexpr size_t kCopyBytes = size_t{1} << 30;
constexpr int kCopyRuns = 10;
constexpr size_t kH2dBytes = size_t{256} << 20;
constexpr int kH2dRuns = 5;
constexpr int kGemmN = 8192;
constexpr int kGemmRuns = 5;

// Seconds of the fastest of `runs` calls of `op` on `stream`, after one untimed call.
template <typename Op>
double best_seconds(cudaStream_t stream, int runs, Op op) {
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "ceilings");
  check(cudaEventCreate(&stop), "ceilings");
  op();
  float best_ms = 0;
  for (int i = 0; i < runs; ++i) {
    check(cudaEventRecord(start, stream), "ceilings");
    op();
    check(cudaEventRecord(stop, stream), "ceilings");
    check(cudaEventSynchronize(stop), "ceilings");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "ceilings");
    best_ms = i == 0 ? ms : std::min(best_ms, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best_ms / 1e3;
}

// Device memory freed on every path out.
struct Scratch {
  void* p = nullptr;
  explicit Scratch(size_t bytes) { check(cudaMalloc(&p, bytes), "ceilings buffer"); }
  ~Scratch() { cudaFree(p); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

}  // namespace

DeviceCeilings measure_ceilings(cudaStream_t stream) {
  DeviceCeilings c;
  {
    Scratch src(kCopyBytes), dst(kCopyBytes);
    check(cudaMemsetAsync(src.p, 1, kCopyBytes, stream), "ceilings");
    const double s = best_seconds(stream, kCopyRuns, [&] {
      check(cudaMemcpyAsync(dst.p, src.p, kCopyBytes, cudaMemcpyDeviceToDevice, stream),
            "ceilings copy");
    });
    c.copy_bytes_per_s = 2.0 * static_cast<double>(kCopyBytes) / s;
  }
  {
    Scratch dst(kH2dBytes);
    void* src = nullptr;
    check(cudaHostAlloc(&src, kH2dBytes, cudaHostAllocDefault), "ceilings pinned buffer");
    std::memset(src, 1, kH2dBytes);
    const double s = best_seconds(stream, kH2dRuns, [&] {
      check(cudaMemcpyAsync(dst.p, src, kH2dBytes, cudaMemcpyHostToDevice, stream),
            "ceilings host-to-device copy");
    });
    cudaFreeHost(src);
    c.h2d_bytes_per_s = static_cast<double>(kH2dBytes) / s;
  }
  const size_t elems = static_cast<size_t>(kGemmN) * kGemmN;
  Scratch a(elems * 2), b(elems * 2), out(elems * 2);
  // Small random-looking bf16 values (0x3c00-ish bit patterns) rather than zeros, so that the
  // tensor cores do not see a trivially sparse input.
  check(cudaMemsetAsync(a.p, 0x3c, elems * 2, stream), "ceilings");
  check(cudaMemsetAsync(b.p, 0x3b, elems * 2, stream), "ceilings");
  cublasHandle_t handle = nullptr;
  check(cublasCreate(&handle), "ceilings cublasCreate");
  check(cublasSetStream(handle, stream), "ceilings");
  const float alpha = 1.0f, beta = 0.0f;
  const double s = best_seconds(stream, kGemmRuns, [&] {
    check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, kGemmN, kGemmN, kGemmN, &alpha, a.p,
                       CUDA_R_16BF, kGemmN, b.p, CUDA_R_16BF, kGemmN, &beta, out.p, CUDA_R_16BF,
                       kGemmN, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "ceilings bf16 GEMM");
  });
  cublasDestroy(handle);
  c.gemm_flops = 2.0 * kGemmN * static_cast<double>(kGemmN) * kGemmN / s;
  return c;
}

}  // namespace ts::cuda
