// Routed experts on the device: top-k routing by the family's rule, and the weighted sum of the
// k experts' outputs. With them (and the indexed GEMVs) a decode step over resident experts never
// reads the routing back to the host, so it can be recorded as a graph.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/routed_sum.cuh"
#include "backend/cuda/warp.cuh"
#include "backend/expert_paging.h"
#include "core/error.h"

namespace ts::cuda {
namespace {

// Expert groups of a group-limited choice at most: a group a lane in limit_to_groups.
constexpr int kMaxRouteGroups = 32;

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

// route_token's group-limited choice on a row's choice scores (lane l's experts l, l + 32, ...):
// groups of E / n_group consecutive experts, each scored by the sum of its two best scores (its
// one score for groups of one), scanned in expert order as the host does; the topk_group best
// groups (the lower index on ties) are kept and every other expert's score becomes -inf.
template <int kPerLane>
__device__ void limit_to_groups(float (&score)[kPerLane], int E, int n_group, int topk_group) {
  __shared__ float s[kMaxDeviceRoutedExperts];
  __shared__ float group_score[kMaxRouteGroups];
  __shared__ bool keep[kMaxRouteGroups];
  const int lane = threadIdx.x, size = E / n_group;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)
    if (lane + 32 * j < E) s[lane + 32 * j] = score[j];
  __syncwarp();
  if (lane < n_group) {
    const float* g = s + lane * size;
    float best = -INFINITY, second = -INFINITY;
    for (int i = 0; i < size; ++i) {
      if (g[i] > best) {
        second = best;
        best = g[i];
      } else if (g[i] > second) {
        second = g[i];
      }
    }
    group_score[lane] = size > 1 ? best + second : best;
  }
  __syncwarp();
  if (lane < n_group) {
    const float mine = group_score[lane];
    int ahead = 0;  // groups before this one in the host's sorted order
    for (int g = 0; g < n_group; ++g)
      ahead += group_score[g] > mine || (group_score[g] == mine && g < lane);
    keep[lane] = ahead < topk_group;
  }
  __syncwarp();
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    if (e < E && !keep[e / size]) score[j] = -INFINITY;
  }
}

// One warp per row, every score in registers: lane l holds experts l, l + 32, ... (kPerLane of
// them: 4 up to 128 experts, 8 up to 256, 32 up to 1024). The row is loaded once, with all of a
// lane's loads in flight together; each of the k selection rounds is a compare over the lane's own
// scores and a five-step shuffle, with no shared-memory scans and no barriers (a shared-memory
// version with rolled loops over the row was several times slower, one global-memory round trip
// per loop step: docs/PERFORMANCE.md, "Measured choices").
template <int kPerLane>
__global__ void __launch_bounds__(32)
    route_kernel(const float* logits, RouterArgs a, int32_t* ids, float* weights) {
  pdl_enter();
  const int lane = threadIdx.x;
  const int E = static_cast<int>(a.n_expert), k = static_cast<int>(a.k);
  const RouterScoring scoring = a.scoring;
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * E;
  float raw[kPerLane], p[kPerLane], score[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    raw[j] = e < E ? row[e] : -FLT_MAX;
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
  } else if (scoring == RouterScoring::SigmoidBiasTopk ||
             scoring == RouterScoring::SigmoidGroupTopk) {
    // The bias decides which experts run; the weights stay the unbiased sigmoids.
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      p[j] = 1.0f / (1.0f + expf(-raw[j]));
      score[j] = e < E ? p[j] + (a.bias != nullptr ? a.bias[e] : 0.0f) : -FLT_MAX;
    }
    if (scoring == RouterScoring::SigmoidGroupTopk)
      limit_to_groups<kPerLane>(score, E, static_cast<int>(a.n_group),
                                static_cast<int>(a.topk_group));
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
  } else {
    // route_token's order: renormalised, then scaled, then each expert's own factor.
    if (a.norm_topk) {
      float sum = 0.0f;
      for (int i = 0; i < k; ++i) sum += term[i];
      for (int i = 0; i < k; ++i) term[i] /= sum;
    }
    if (a.scale != 1.0f)
      for (int i = 0; i < k; ++i) term[i] *= a.scale;
    if (a.expert_scale != nullptr)
      for (int i = 0; i < k; ++i) term[i] *= a.expert_scale[chosen[i]];
  }
  for (int i = 0; i < k; ++i) {
    ids[static_cast<int64_t>(blockIdx.x) * k + i] = chosen[i];
    weights[static_cast<int64_t>(blockIdx.x) * k + i] = term[i];
  }
}

// Each thread sums its columns over the k experts (routed_sum.cuh). Token blockIdx.y.
__global__ void combine_experts_kernel(RoutedRows r, int64_t n, float* out) {
  pdl_enter();
  const int64_t m = blockIdx.y;
  __shared__ int order[kMaxTopK];
  __shared__ float wt[kMaxTopK];
  routed_order(r, m, order, wt);
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < n;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc[1];
    routed_sum<1>(r, m, n, order, wt, c, acc);
    out[m * n + c] = acc[0];
  }
}

// One thread: the rule is sequential (each miss takes the slot the previous ones left), and a
// layer has a few dozen slots at most to scan.
__global__ void page_experts_kernel(ExpertPages p, const int32_t* ids, int k) {
  pdl_enter();
  page_step(p, ids, k);  // k <= n_slots: the store refuses fewer slots than routed experts
}

__global__ void commit_experts_kernel(ExpertPages p, const int32_t* ids, int k) {
  pdl_enter();
  commit_step(p, ids, k);
}

// Expert blockIdx.y's weight (`bytes`, 16-byte multiples at 16-byte aligned addresses) into its
// fill entry, the grid's threads over 16-byte chunks.
__global__ void fill_experts_kernel(const void* const* experts, void* const* fill,
                                    const int32_t* ids, size_t chunks) {
  pdl_enter();
  const int32_t id = ids[blockIdx.y];
  auto* dst = static_cast<uint4*>(fill[id]);
  if (dst == nullptr) return;
  const auto* src = static_cast<const uint4*>(experts[id]);
  for (size_t c = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[c] = src[c];
}

}  // namespace

void launch_page_experts(const ExpertPages& p, const int32_t* ids, int64_t k, cudaStream_t stream) {
  launch("page experts", page_experts_kernel, 1, 1, 0, stream, p, ids, static_cast<int>(k));
}

void launch_commit_experts(const ExpertPages& p, const int32_t* ids, int64_t k,
                           cudaStream_t stream) {
  launch("commit experts", commit_experts_kernel, 1, 1, 0, stream, p, ids, static_cast<int>(k));
}

void launch_fill_experts(const Weight& shape, const void* const* experts, void* const* fill,
                         const int32_t* ids, int64_t n, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(shape.rows) * shape.row_stride;
  if (bytes % 16 != 0 || reinterpret_cast<uintptr_t>(shape.data) % 16 != 0)
    fail(ErrorKind::Unsupported, "expert paging: weights of " + std::to_string(bytes) +
                                     " bytes are not whole 16-byte chunks");
  const size_t chunks = bytes / 16;
  const dim3 grid(static_cast<unsigned>(std::min<size_t>((chunks + 255) / 256, 1024)),
                  static_cast<unsigned>(n));
  launch("fill experts", fill_experts_kernel, grid, 256, 0, stream, experts, fill, ids, chunks);
}

void launch_route(const float* logits, int64_t M, const RouterArgs& a, int32_t* ids, float* weights,
                  cudaStream_t stream) {
  if (a.scoring == RouterScoring::SigmoidGroupTopk &&
      (a.n_group < 1 || a.n_group > kMaxRouteGroups || a.n_expert % a.n_group != 0 ||
       a.topk_group < 1 || a.topk_group > a.n_group))
    fail(ErrorKind::Unsupported, "CUDA route: " + std::to_string(a.n_expert) + " experts in " +
                                     std::to_string(a.n_group) + " groups, " +
                                     std::to_string(a.topk_group) + " kept (the kernel takes " +
                                     std::to_string(kMaxRouteGroups) + " equal groups at most)");
  const auto kernel = a.n_expert <= 128   ? route_kernel<4>
                      : a.n_expert <= 256 ? route_kernel<8>
                                          : route_kernel<32>;
  launch("route", kernel, static_cast<unsigned>(M), 32, 0, stream, logits, a, ids, weights);
}

void launch_combine_experts(const RoutedRows& r, int64_t M, int64_t n, float* out,
                            cudaStream_t stream) {
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((n + kThreads - 1) / kThreads), static_cast<unsigned>(M));
  launch("combine experts", combine_experts_kernel, grid, kThreads, 0, stream, r, n, out);
}

}  // namespace ts::cuda
