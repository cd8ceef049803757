// What the decode and prefill attention kernels share: their parameters, the causal key range of a
// query position, the soft cap, warp reductions and one cache element as f32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/kv_store.cuh"
#include "backend/cuda/quant_device.cuh"
#include "backend/cuda/warp.cuh"

namespace ts::cuda {

struct AttnParams {
  const float* q;
  const uint8_t* k;
  const uint8_t* v;
  size_t row_bytes;
  const int32_t* pos;
  int64_t M;
  int n_head;
  int group;  // query heads per kv head
  int head_dim;
  float scale;
  float softcap;
  int64_t window;
  const float* sinks;      // [n_head] or null (AttentionArgs::sinks)
  const int32_t* key_end;  // [M] or null (AttentionArgs::key_end, device memory)
};

// Element e of one cache row.
template <DType T>
__device__ __forceinline__ float kv_elem(const uint8_t* row, int64_t e) {
  if constexpr (T == DType::Q8_0) {
    const uint8_t* blk = row + (e / kQK32) * sizeof(BlockQ8_0);
    return static_cast<float>(static_cast<int8_t>(blk[2 + e % kQK32])) *
           half_bits_to_float(load_u16(blk));
  } else {
    return plain_elem<T>(row, e);
  }
}

__device__ __forceinline__ float cap_score(float s, float softcap) {
  return softcap > 0.0f ? softcap * tanhf(s / softcap) : s;
}

// A softmax denominator l over scores whose max is m, with query head h's sink added: a logit with
// no value (gpt-oss), in the CPU's order (after the keys' sum).
__device__ __forceinline__ float with_sink(float l, float m, const float* sinks, int64_t h) {
  return sinks != nullptr ? l + expf(sinks[h] - m) : l;
}

// Keys [lo, hi) that query row m may see: up to its own position, or up to its key_end where that
// is later (the rest of its image); the window counts back from its own position either way.
__device__ __forceinline__ void key_range(const AttnParams& p, int64_t m, int64_t& lo,
                                          int64_t& hi) {
  const int64_t own = static_cast<int64_t>(p.pos[m]) + 1;
  hi = p.key_end != nullptr ? max(own, static_cast<int64_t>(p.key_end[m])) : own;
  lo = p.window > 0 ? max(int64_t{0}, own - p.window) : 0;
}

// Calls f.template operator()<T, E>() for the cache type and the per-lane head-dimension count.
template <class F>
void dispatch_kv(DType t, int head_dim, F&& f) {
  dispatch_kv_type(t, [&]<DType T>() {
    if (head_dim <= 32)
      f.template operator()<T, 1>();
    else if (head_dim <= 64)
      f.template operator()<T, 2>();
    else if (head_dim <= 128)
      f.template operator()<T, 4>();
    else
      f.template operator()<T, 8>();
  });
}

// pos, a.sinks and a.key_end in device memory (the launchers' convention, kernels.h).
inline AttnParams make_attn_params(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                                   const AttentionArgs& a) {
  return AttnParams{q,
                    static_cast<const uint8_t*>(kv.k),
                    static_cast<const uint8_t*>(kv.v),
                    kv.row_bytes,
                    pos,
                    M,
                    static_cast<int>(a.n_head),
                    static_cast<int>(a.n_head / a.n_head_kv),
                    static_cast<int>(a.head_dim),
                    a.scale,
                    a.softcap,
                    a.window,
                    a.sinks,
                    a.key_end};
}

}  // namespace ts::cuda
