// Device side of the routing: one row of router logits to its top-k experts and their weights, by
// one warp. The one definition of route_kernel (moe.cu) and of the MoE layer's fused entry
// (moe_entry.cu).
#pragma once

#include <cfloat>
#include <cstdint>

#include "backend/cuda/kernels.h"
#include "backend/cuda/warp.cuh"

namespace ts::cuda {

// A score and its expert as one key whose unsigned order is the routing order: higher scores first,
// the lower index on ties (-0 counts as +0, as the host's float compare has it). Never 0, the key
// of no expert.
__device__ __forceinline__ uint64_t rank_key(float score, int e) {
  uint32_t b = __float_as_uint(score);
  if (b == 0x80000000u) b = 0;
  const uint32_t ordered = (b & 0x80000000u) != 0 ? ~b : b | 0x80000000u;
  return static_cast<uint64_t>(ordered) << 32 | (0xFFFFFFFFu - static_cast<uint32_t>(e));
}

__device__ __forceinline__ int key_expert(uint64_t key) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(key));
}

// The largest key of the warp: the largest high word, then the largest low word of the lanes that
// hold it. Two warp reductions in hardware (redux.sync, sm_80 and later) where a five-step
// shuffled maximum of 64-bit keys took ten shuffles, one after the other.
__device__ __forceinline__ uint64_t warp_max_key(uint64_t key) {
  const auto hi = static_cast<uint32_t>(key >> 32), lo = static_cast<uint32_t>(key);
  const uint32_t best_hi = __reduce_max_sync(0xffffffffu, hi);
  const uint32_t best_lo = __reduce_max_sync(0xffffffffu, hi == best_hi ? lo : 0u);
  return static_cast<uint64_t>(best_hi) << 32 | best_lo;
}

// One row of E router logits by one warp: ids and weights of its top-k, as route_token() does.
// Every score in registers: lane l holds experts l, l + 32, ... (kPerLane of
// them: 4 up to 128 experts, 8 up to 256, 32 up to 1024). The row is loaded once, with all of a
// lane's loads in flight together; each of the k selection rounds is a compare over the lane's own
// scores and a five-step shuffle, with no shared-memory scans and no barriers (a shared-memory
// version with rolled loops over the row took ~12 us a layer, one global-memory round trip per loop
// step).
template <int kPerLane>
__device__ __forceinline__ void route_row(const float* row, int E, int k, RouterScoring scoring,
                                          bool norm_topk, const float* bias, int32_t* ids,
                                          float* weights) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  float raw[kPerLane], p[kPerLane], score[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    raw[j] = e < E ? __ldcg(row + e) : -FLT_MAX;  // from L2: other blocks may have written it
  }
  if (scoring == RouterScoring::SoftmaxTopk) {
    float mx = -FLT_MAX;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) mx = fmaxf(mx, raw[j]);
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      p[j] = lane + 32 * j < E ? expf(raw[j] - mx) : 0.0f;
      sum += p[j];
    }
    sum = warp_sum(sum);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) score[j] = p[j] = p[j] / sum;
  } else if (scoring == RouterScoring::SigmoidBiasTopk) {
    // The bias decides which experts run; the weights stay the unbiased sigmoids.
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      p[j] = 1.0f / (1.0f + expf(-raw[j]));
      score[j] = e < E ? p[j] + (bias != nullptr ? bias[e] : 0.0f) : -FLT_MAX;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) score[j] = p[j] = raw[j];
  }
  // k rounds of: the best not-yet-taken expert, highest score, the lower index on ties (as
  // route_token's sort). Score and index travel as one 64-bit key, so a round's reduction is one
  // maximum of keys (warp_max_key); the winner's lane records it with its weight term (p, or the
  // raw logit for TopkSoftmax) and retires its key.
  __shared__ int chosen[kMaxTopK];
  __shared__ float term[kMaxTopK];
  uint64_t key[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    key[j] = e < E ? rank_key(score[j], e) : 0;
  }
  for (int i = 0; i < k; ++i) {
    uint64_t best = 0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) best = max(best, key[j]);
    best = warp_max_key(best);
    const int e = key_expert(best);
    if (e % 32 == lane) {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (j == e / 32) {
          key[j] = 0;
          chosen[i] = e;
          term[i] = scoring == RouterScoring::TopkSoftmax ? raw[j] : p[j];
        }
    }
  }
  __syncwarp();
  if (lane != 0) return;
  // The weights are worked out in shared memory and stored once.
  if (scoring == RouterScoring::TopkSoftmax) {
    float mx = term[0];
    for (int i = 1; i < k; ++i) mx = fmaxf(mx, term[i]);
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += term[i] = expf(term[i] - mx);
    for (int i = 0; i < k; ++i) term[i] /= sum;
  } else if (norm_topk) {
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += term[i];
    for (int i = 0; i < k; ++i) term[i] /= sum;
  }
  for (int i = 0; i < k; ++i) {
    ids[i] = chosen[i];
    weights[i] = term[i];
  }
}

}  // namespace ts::cuda
