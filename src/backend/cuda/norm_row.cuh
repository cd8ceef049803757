// The vectorised RMS norm of one row held in registers: thread t holds the row's float4s t,
// t + blockDim.x, ... (kVec of them; zero past the row's n / 4), read in one round of 16-byte
// loads. The one definition of rms_norm_vec_kernel's arithmetic (elementwise.cu) and of the MoE
// layer's fused entry (moe_entry.cu): the same partial sums and products, so the same bits.
#pragma once

#include <cstdint>

#include "backend/cuda/act_quant.cuh"
#include "backend/cuda/warp.cuh"

namespace ts::cuda {

// Index of the thread's float4 i in the row.
__device__ __forceinline__ int64_t vec_index(int i) {
  return threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
}

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// 1 / rms over the row of n elements whose thread shares are v (block-wide: every thread calls it).
template <int kVec>
__device__ __forceinline__ float row_inv_rms(const float4 (&v)[kVec], int64_t n, float eps) {
  float ss = 0;
#pragma unroll
  for (int i = 0; i < kVec; ++i)
    ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
  ss = block_sum(ss);
  return 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
}

// v * inv * (w or 1 + w), element by element: the norm's output.
__device__ __forceinline__ float4 norm4(float4 v, float inv, float4 g, bool plus_one) {
  if (plus_one) g = make_float4(1.0f + g.x, 1.0f + g.y, 1.0f + g.z, 1.0f + g.w);
  return make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
}

// Writes row `row`'s norm output (n4 float4s at o) from the thread's shares v, and with acts.q its
// int8 form for the GEMV (act_quant.cuh: eight threads hold a 32-element block, n % 32 == 0).
template <int kVec>
__device__ __forceinline__ void store_norm(const float4 (&v)[kVec], float inv, const float4* w4,
                                           bool plus_one, int64_t row, int64_t n4, float4* o,
                                           ActsView acts) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int64_t j = vec_index(i);
    const bool live = j < n4;
    float4 y = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (live) o[j] = y = norm4(v[i], inv, w4[j], plus_one);
    if (acts.q != nullptr) {
      const float e[4] = {y.x, y.y, y.z, y.w};
      quantize_block_part<4>(e, live, row * n4 * 4 + 4 * j, acts);
    }
  }
}

}  // namespace ts::cuda
