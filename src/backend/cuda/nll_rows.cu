// Backend::nll_rows on the device: perplexity scores every row of a window against a vocabulary of
// up to ~250k entries, and copying those logits to the host (1.2 GB for 2048 rows of Qwen3's
// 151,936) took longer than computing them. Here a block reduces each row where it lies and only
// its value goes back.
#include <cmath>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace ts::cuda {
namespace {

constexpr int kThreads = 256;

// Reduces v over the block with op (every thread gets the result); `shared` holds a value per warp.
template <class T, class Op>
__device__ T block_reduce(T v, T* shared, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < kThreads / 32; ++w) v = op(v, shared[w]);
  __syncthreads();  // shared is reused by the next reduction
  return v;
}

// nll_of_row (backend.h) of row blockIdx.x: the maximum (exact in any order), then the sum of
// exp(x - max) in double, in a fixed order for a given V: the same value on every run.
__global__ void __launch_bounds__(kThreads)
    nll_rows_kernel(const float* logits, int64_t V, const int32_t* targets, double* out) {
  pdl_enter();
  __shared__ double partial[kThreads / 32];
  __shared__ float partial_max[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * V;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) mx = fmaxf(mx, row[i]);
  mx = block_reduce(mx, partial_max, [](float a, float b) { return fmaxf(a, b); });
  double z = 0;
  for (int64_t i = threadIdx.x; i < V; i += kThreads)
    z += exp(static_cast<double>(row[i]) - static_cast<double>(mx));
  z = block_reduce(z, partial, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0)
    out[blockIdx.x] =
        log(z) + static_cast<double>(mx) - static_cast<double>(row[targets[blockIdx.x]]);
}

}  // namespace

void launch_nll_rows(const float* logits, int64_t n, int64_t V, const int32_t* targets, double* out,
                     cudaStream_t stream) {
  launch("nll rows", nll_rows_kernel, static_cast<unsigned>(n), kThreads, 0, stream, logits, V,
         targets, out);
}

}  // namespace ts::cuda
