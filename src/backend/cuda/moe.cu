// Routed experts on the device: top-k routing by the family's rule, and the weighted sum of the
// k experts' outputs. With them (and the indexed GEMVs) a decode step over resident experts never
// reads the routing back to the host, so it can be recorded as a graph.
#include <cfloat>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace ts::cuda {
namespace {

constexpr int kMaxTopK = 64;

__device__ __forceinline__ float warp_reduce(float v, bool take_max) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = take_max ? fmaxf(v, o) : v + o;
  }
  return v;
}

// One warp per row: routing is a few hundred scores, and a warp needs no block-wide barriers
// between the k selection rounds (a 256-thread version spent ~9 us a layer in them).
// Shared memory: the probabilities p and the selection scores, E floats each, and E taken flags.
__global__ void __launch_bounds__(32)
    route_kernel(const float* logits, int64_t E, int k, RouterScoring scoring, bool norm_topk,
                 const float* bias, int32_t* ids, float* weights) {
  pdl_enter();
  extern __shared__ float smem[];
  float* p = smem;
  float* score = smem + E;
  auto* taken = reinterpret_cast<uint8_t*>(smem + 2 * E);
  __shared__ int chosen[kMaxTopK];
  const int lane = threadIdx.x;
  const float* row = logits + blockIdx.x * E;
  for (int64_t e = lane; e < E; e += 32) taken[e] = 0;
  if (scoring == RouterScoring::SoftmaxTopk) {
    float mx = -FLT_MAX;
    for (int64_t e = lane; e < E; e += 32) mx = fmaxf(mx, row[e]);
    mx = warp_reduce(mx, true);
    float sum = 0.0f;
    for (int64_t e = lane; e < E; e += 32) sum += p[e] = expf(row[e] - mx);
    sum = warp_reduce(sum, false);
    for (int64_t e = lane; e < E; e += 32) score[e] = p[e] = p[e] / sum;
  } else if (scoring == RouterScoring::SigmoidBiasTopk) {
    // The bias decides which experts run; the weights stay the unbiased sigmoids.
    for (int64_t e = lane; e < E; e += 32) {
      p[e] = 1.0f / (1.0f + expf(-row[e]));
      score[e] = p[e] + (bias != nullptr ? bias[e] : 0.0f);
    }
  } else {
    for (int64_t e = lane; e < E; e += 32) score[e] = row[e];
  }
  __syncwarp();
  // k rounds of: the best not-yet-taken expert, highest score, the lower index on ties (as
  // route_token's sort).
  for (int i = 0; i < k; ++i) {
    float v = -FLT_MAX;
    int idx = -1;
    for (int64_t e = lane; e < E; e += 32)
      if (!taken[e] && (idx < 0 || score[e] > v)) v = score[e], idx = static_cast<int>(e);
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, off);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, off);
      if (oi >= 0 && (idx < 0 || ov > v || (ov == v && oi < idx))) v = ov, idx = oi;
    }
    if (lane == 0) chosen[i] = idx, taken[idx] = 1;
    __syncwarp();
  }
  if (lane != 0) return;
  // The weights are worked out in shared memory and stored once: reading back global memory just
  // written costs a round trip to L2 per read, and this tail is serial.
  __shared__ float w[kMaxTopK];
  if (scoring == RouterScoring::TopkSoftmax) {
    float mx = row[chosen[0]];
    for (int i = 1; i < k; ++i) mx = fmaxf(mx, row[chosen[i]]);
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += w[i] = expf(row[chosen[i]] - mx);
    for (int i = 0; i < k; ++i) w[i] /= sum;
  } else {
    for (int i = 0; i < k; ++i) w[i] = p[chosen[i]];
    if (norm_topk) {
      float sum = 0.0f;
      for (int i = 0; i < k; ++i) sum += w[i];
      for (int i = 0; i < k; ++i) w[i] /= sum;
    }
  }
  for (int i = 0; i < k; ++i) {
    ids[blockIdx.x * k + i] = chosen[i];
    weights[blockIdx.x * k + i] = w[i];
  }
}

// Each thread sums its columns over the k experts in ascending id order, with the same fused
// multiply-add the host path's scatter_add_rows applies to a zeroed output.
__global__ void combine_experts_kernel(const float* y, const int32_t* ids, const float* weights,
                                       int k, int64_t n, float* out) {
  pdl_enter();
  // The ids and weights in shared memory first: the sort below would otherwise wait on a global
  // load at every comparison.
  __shared__ int order[kMaxTopK], id[kMaxTopK];
  __shared__ float wt[kMaxTopK];
  for (int i = threadIdx.x; i < k; i += blockDim.x) id[i] = ids[i], wt[i] = weights[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < k; ++i) {
      int j = i;
      while (j > 0 && id[order[j - 1]] > id[i]) {
        order[j] = order[j - 1];
        --j;
      }
      order[j] = i;
    }
  }
  __syncthreads();
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < n;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) acc = fmaf(wt[order[i]], y[order[i] * n + c], acc);
    out[c] = acc;
  }
}

}  // namespace

void launch_route(const float* logits, int64_t M, const RouterArgs& a, int32_t* ids, float* weights,
                  cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(a.n_expert) * (2 * sizeof(float) + 1);
  launch("route", route_kernel, static_cast<unsigned>(M), 32, smem, stream, logits, a.n_expert,
         static_cast<int>(a.k), a.scoring, a.norm_topk, a.bias, ids, weights);
}

void launch_combine_experts(const float* y, const int32_t* ids, const float* weights, int64_t k,
                            int64_t n, float* out, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  launch("combine experts", combine_experts_kernel, blocks, kThreads, 0, stream, y, ids, weights,
         static_cast<int>(k), n, out);
}

}  // namespace ts::cuda
