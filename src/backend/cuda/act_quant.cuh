// The int8 GEMV's activations (gemv_int8.cu): each 32-element block x ~= d * q, q int8, with the
// sums of its two halves' codes. Quantised by quantize_acts_kernel ahead of a GEMV, or by the
// kernel that writes the activations (the norms and the GLU, elementwise.cu; the decode attention,
// attention_decode.cu), with the same arithmetic, so the GEMV sees the same bytes either way.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ts::cuda {

// One 32-element block's terms: x[i] ~= d * q[i]; s0 / s1 are the sums of the codes of its two
// halves (the q4_k minimum and the q6_k offset of 32 multiply them).
struct alignas(8) ActBlock {
  float d;
  int16_t s0, s1;
};

// The scratch of `elems` activations: their codes, padded to kActAlign bytes, then a block term
// per 32 elements.
constexpr size_t kActAlign = 256;
__host__ __device__ constexpr size_t act_codes_bytes(int64_t elems) {
  return (static_cast<size_t>(elems) + kActAlign - 1) / kActAlign * kActAlign;
}

struct ActsView {
  int8_t* q = nullptr;
  ActBlock* meta = nullptr;
};

__host__ __device__ inline ActsView acts_view(void* scratch, int64_t elems) {
  auto* q = static_cast<int8_t*>(scratch);
  return {q, reinterpret_cast<ActBlock*>(q + act_codes_bytes(elems))};
}

#ifdef __CUDACC__
// Elements e0 .. e0 + kPer - 1 (v) of a 32-element block held by 32 / kPer consecutive lanes of a
// warp, lane (e0 % 32) / kPer of them: their codes, and from the block's first lane its terms.
// Every lane of the warp calls it (the block's lanes exchange values); `live` false for lanes that
// hold no block, whose whole block is then absent too. The CPU's rounding (quant/quantize.cpp):
// d = amax / 127, codes x * (1 / d) rounded half away from zero.
template <int kPer>
__device__ __forceinline__ void quantize_block_part(const float (&v)[kPer], bool live, int64_t e0,
                                                    ActsView out) {
  static_assert(kPer == 1 || kPer == 4, "a lane holds one element or four");
  constexpr int kGroup = 32 / kPer;  // lanes of a block
  constexpr unsigned kAll = 0xffffffffu;
  float amax = fabsf(v[0]);
#pragma unroll
  for (int k = 1; k < kPer; ++k) amax = fmaxf(amax, fabsf(v[k]));
  for (int off = kGroup / 2; off > 0; off >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(kAll, amax, off));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int half = 0;  // this lane's codes, then the sum over its half of the block
  uint32_t packed = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const float s = __fmul_rn(v[k], id);  // never contracted with the rounding add below
    const int code = static_cast<int>(s + (s >= 0.0f ? 0.5f : -0.5f));
    half += code;
    packed |= (static_cast<uint32_t>(code) & 0xFFu) << (8 * k);
  }
  for (int off = kGroup / 4; off > 0; off >>= 1) half += __shfl_xor_sync(kAll, half, off);
  const int lane = static_cast<int>(threadIdx.x % 32), first = lane & ~(kGroup - 1);
  const int upper = __shfl_sync(kAll, half, first + kGroup / 2);
  if (!live) return;
  if constexpr (kPer == 4)
    *reinterpret_cast<uint32_t*>(out.q + e0) = packed;
  else
    out.q[e0] = static_cast<int8_t>(packed & 0xFFu);
  if (lane == first)
    out.meta[e0 / 32] = ActBlock{d, static_cast<int16_t>(half), static_cast<int16_t>(upper)};
}
#endif

}  // namespace ts::cuda
