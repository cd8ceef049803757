// The weighted sum of a token's k experts' rows, the one definition of combine_experts_kernel
// (moe.cu) and of the norm that adds it to the residual stream (elementwise.cu): the experts in
// ascending id order, a fused multiply-add each from zero, as the host path's scatter_add_rows
// applies them to a zeroed output, so that every path gives the same bits.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace ts::cuda {

// Token m's experts in that order (stable on equal ids): the r-th is position order[r] of the k,
// with weight wt[r] (shared memory, kMaxTopK each). Block-wide; ends with __syncthreads.
__device__ __forceinline__ void routed_order(const RoutedRows& r, int64_t m, int* order,
                                             float* wt) {
  const int32_t* ids = r.ids + m * r.k;
  for (int i = static_cast<int>(threadIdx.x); i < r.k; i += static_cast<int>(blockDim.x)) {
    const int32_t id = ids[i];
    int rank = 0;
    for (int j = 0; j < r.k; ++j) rank += ids[j] < id || (ids[j] == id && j < i);
    order[rank] = i;
    wt[rank] = r.weights[m * r.k + i];
  }
  __syncthreads();
}

// Elements c .. c + kN - 1 (kN of 1, or 4 at a 16-byte aligned c) of token m's sum over rows of n.
template <int kN>
__device__ __forceinline__ void routed_sum(const RoutedRows& r, int64_t m, int64_t n,
                                           const int* order, const float* wt, int64_t c,
                                           float (&acc)[kN]) {
  static_assert(kN == 1 || kN == 4);
#pragma unroll
  for (int e = 0; e < kN; ++e) acc[e] = 0.0f;
#pragma unroll 8  // the k loads in flight together, not one round trip per expert
  for (int i = 0; i < r.k; ++i) {
    const float* row = r.y + (m * r.k + order[i]) * n + c;
    if constexpr (kN == 4) {
      const float4 v = *reinterpret_cast<const float4*>(row);
      acc[0] = fmaf(wt[i], v.x, acc[0]);
      acc[1] = fmaf(wt[i], v.y, acc[1]);
      acc[2] = fmaf(wt[i], v.z, acc[2]);
      acc[3] = fmaf(wt[i], v.w, acc[3]);
    } else {
      acc[0] = fmaf(wt[i], row[0], acc[0]);
    }
  }
}

}  // namespace ts::cuda
