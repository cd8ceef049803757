// Gated DeltaNet on the GPU (Backend::conv_silu, Backend::delta_rule): the same formulas as the CPU
// backend's cpu/delta_net.cpp, in f32, over the M rows of one sequence in order.
//
// conv_silu: one thread per channel walks the rows with the channel's taps and its last
// kernel - 1 inputs in registers. The rows are read a batch at a time before any is written back
// (x is transformed in place), so that a batch's loads are in flight together.
//
// delta_rule: the recurrent form. The value columns of a head's state are independent of each
// other (kv_mem[j], delta[j], S[:, j] and out[j] read only column j, given q, k, beta and g), so
// block (h, c) owns columns 32c .. 32c + 31 of value head h: lane l holds column 32c + l, and the
// eight warps split the k_head_dim rows (row i in warp i % 8), kDeltaRows a thread at most, in
// registers for the whole call. The two sums over k_head_dim per row (S^T k, then S^T q) are each
// a lane's own rows, then the eight warps' partials added in shared memory. A row takes two
// barriers: while every warp updates the state with row t, three warps normalise row t + 1's q and
// k and compute its gates into the other half of a double buffer, from registers loaded a row
// before that, so that no global load sits between the barriers.
#include <iterator>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/warp.cuh"

namespace ts::cuda {
namespace {

__device__ __forceinline__ float silu(float x) {
  return x / (1.0f + expf(-x));
}

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// PyTorch's softplus with its default threshold: x itself above 20.
__device__ __forceinline__ float softplus(float x) {
  return x > 20.0f ? x : log1pf(expf(x));
}

constexpr int kConvThreads = 64;  // small blocks: a layer's few thousand channels fill more SMs
constexpr int kConvBatch = 8;     // rows loaded before the first of them is written back

// x [M][channels] in place, taps [channels][K], window [K - 1][channels] (oldest first).
template <int K>
__global__ void __launch_bounds__(kConvThreads)
    conv_silu_kernel(float* x, int64_t M, int64_t channels, const float* taps, float* window) {
  constexpr int kPast = K - 1;
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const bool live = c < channels;
  float w[K];
#pragma unroll
  for (int j = 0; j < K; ++j) w[j] = live ? taps[c * K + j] : 0.0f;  // weights: before the wait
  pdl_enter();
  if (!live) return;
  float past[kPast > 0 ? kPast : 1];
#pragma unroll
  for (int j = 0; j < kPast; ++j) past[j] = window[j * channels + c];
  for (int64_t t0 = 0; t0 < M; t0 += kConvBatch) {
    float in[kConvBatch];
#pragma unroll
    for (int b = 0; b < kConvBatch; ++b)
      if (t0 + b < M) in[b] = x[(t0 + b) * channels + c];
#pragma unroll
    for (int b = 0; b < kConvBatch; ++b) {
      if (t0 + b < M) {
        // The CPU's order: the oldest input first, this row's last.
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < kPast; ++j) acc += w[j] * past[j];
        acc += w[kPast] * in[b];
        x[(t0 + b) * channels + c] = silu(acc);
#pragma unroll
        for (int j = 0; j + 1 < kPast; ++j) past[j] = past[j + 1];
        if constexpr (kPast > 0) past[kPast - 1] = in[b];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPast; ++j) window[j * channels + c] = past[j];
}

constexpr int kDeltaWarps = 8;
constexpr int kDeltaThreads = 32 * kDeltaWarps;
constexpr int kDeltaCols = 32;  // value columns a block: one per lane
constexpr int kMaxHeadDim = static_cast<int>(kMaxDeltaHeadDim);
constexpr int kHeadPerLane = kMaxHeadDim / 32;         // a q or k head's elements per lane
constexpr int kDeltaRows = kMaxHeadDim / kDeltaWarps;  // state rows a thread at most

// The warps that prepare the next row: its query, its key, and its two gates.
constexpr int kQueryWarp = 2, kKeyWarp = 3, kGateWarp = 4;

// One row's inputs that the preparing warps hold a row ahead: their q or k head (kHeadPerLane
// elements a lane), or the beta and alpha logits.
struct NextRow {
  float e[kHeadPerLane];
  float beta, alpha;
};

// State rows a thread: R = ceil(k_head_dim / kDeltaWarps) rounded up to a power of two.
template <int R>
__global__ void __launch_bounds__(kDeltaThreads)
    delta_rule_kernel(const float* qkv, const float* beta, const float* alpha, int64_t M,
                      DeltaRuleArgs a, float* state, float* out) {
  __shared__ float qs[2][kMaxHeadDim], ks[2][kMaxHeadDim];  // normalised q, k: row t in [t & 1]
  __shared__ float gates[2][2];                             // decay, beta: row t in [t & 1]
  __shared__ float kv_part[kDeltaWarps][kDeltaCols], out_part[kDeltaWarps][kDeltaCols];
  const int64_t dk = a.k_head_dim, dv = a.v_head_dim, nv = a.n_v_heads;
  const int64_t h = blockIdx.x;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t j = static_cast<int64_t>(blockIdx.y) * kDeltaCols + lane;  // this lane's column
  const bool col = j < dv;
  const int64_t kh = a.v_heads_tiled ? h % a.n_k_heads : h / (nv / a.n_k_heads);
  const int64_t key_dim = a.n_k_heads * dk, width = 2 * key_dim + nv * dv;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  const float a_h = a.a[h], dt_h = a.dt_bias[h];  // weights: before the wait
  pdl_enter();

  // Row t's inputs into registers: the preparing warps' q or k head or gate logits, and every
  // lane's value v[j].
  NextRow next{};
  auto fetch = [&](int64_t t, float& v) {
    const float* row = qkv + t * width;
    if (warp == kQueryWarp || warp == kKeyWarp) {
      const float* src = row + (warp == kKeyWarp ? key_dim : 0) + kh * dk;
#pragma unroll
      for (int e = 0; e < kHeadPerLane; ++e) {
        const int64_t i = lane + 32 * e;
        next.e[e] = i < dk ? src[i] : 0.0f;
      }
    } else if (warp == kGateWarp && lane == 0) {
      next.beta = beta[t * nv + h];
      next.alpha = alpha[t * nv + h];
    }
    v = col ? row[2 * key_dim + h * dv + j] : 0.0f;
  };
  // The fetched row normalised (q also scaled) and its gates, into buffer half p.
  auto prepare = [&](int p) {
    if (warp == kQueryWarp || warp == kKeyWarp) {
      float ss = 0.0f;
#pragma unroll
      for (int e = 0; e < kHeadPerLane; ++e) ss += next.e[e] * next.e[e];
      const float inv = (warp == kQueryWarp ? q_scale : 1.0f) / sqrtf(warp_sum(ss) + 1e-6f);
      float* dst = warp == kQueryWarp ? qs[p] : ks[p];
#pragma unroll
      for (int e = 0; e < kHeadPerLane; ++e) {
        const int64_t i = lane + 32 * e;
        if (i < dk) dst[i] = next.e[e] * inv;
      }
    } else if (warp == kGateWarp && lane == 0) {
      gates[p][0] = expf(a_h * softplus(next.alpha + dt_h));
      gates[p][1] = sigmoid(next.beta);
    }
  };

  // The state's column j, rows warp + kDeltaWarps r; rows past k_head_dim stay zero.
  float* S = state + h * dk * dv;
  float s[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = warp + kDeltaWarps * r;
    s[r] = col && i < dk ? S[i * dv + j] : 0.0f;
  }

  float v = 0.0f, v_next = 0.0f;
  if (M > 0) {
    fetch(0, v);
    prepare(0);
    if (M > 1) fetch(1, v_next);
  }
  __syncthreads();
  for (int64_t t = 0; t < M; ++t) {
    const int p = static_cast<int>(t & 1);
    // S *= exp(g); this warp's rows of kv_mem = S^T k.
    const float decay = gates[p][0], b = gates[p][1];
    float kv = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t i = warp + kDeltaWarps * r;
      if (i < dk) {
        s[r] *= decay;
        kv += s[r] * ks[p][i];
      }
    }
    kv_part[warp][lane] = kv;
    __syncthreads();
    // delta = (v - kv_mem) beta; S += k (x) delta; this warp's rows of out = S^T q.
    kv = 0.0f;
#pragma unroll
    for (int w = 0; w < kDeltaWarps; ++w) kv += kv_part[w][lane];
    const float delta = (v - kv) * b;
    float o = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t i = warp + kDeltaWarps * r;
      if (i < dk) {
        s[r] += ks[p][i] * delta;
        o += s[r] * qs[p][i];
      }
    }
    out_part[warp][lane] = o;
    // Row t + 1 into the other half (last read in row t - 1, before the barrier above), then the
    // loads of row t + 2.
    if (t + 1 < M) {
      v = v_next;
      prepare(p ^ 1);
      if (t + 2 < M) fetch(t + 2, v_next);
    }
    __syncthreads();
    if (warp == 0 && col) {
      o = 0.0f;
#pragma unroll
      for (int w = 0; w < kDeltaWarps; ++w) o += out_part[w][lane];
      out[t * nv * dv + h * dv + j] = o;
    }
  }

#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = warp + kDeltaWarps * r;
    if (col && i < dk) S[i * dv + j] = s[r];
  }
}

}  // namespace

void launch_conv_silu(float* x, int64_t M, int64_t channels, const float* taps, int64_t kernel,
                      float* window, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((channels + kConvThreads - 1) / kConvThreads);
  // Indexed by kernel - 1: the taps and the window are registers, so their count is a constant.
  static constexpr void (*kKernels[])(float*, int64_t, int64_t, const float*, float*) = {
      conv_silu_kernel<1>, conv_silu_kernel<2>, conv_silu_kernel<3>, conv_silu_kernel<4>,
      conv_silu_kernel<5>, conv_silu_kernel<6>, conv_silu_kernel<7>, conv_silu_kernel<8>};
  static_assert(std::size(kKernels) == kMaxConvKernel);
  launch("conv silu", kKernels[kernel - 1], grid, kConvThreads, 0, stream, x, M, channels, taps,
         window);
}

void launch_delta_rule(const float* qkv, const float* beta, const float* alpha, int64_t M,
                       const DeltaRuleArgs& a, float* state, float* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.n_v_heads),
                  static_cast<unsigned>((a.v_head_dim + kDeltaCols - 1) / kDeltaCols));
  // Registers for the rows a thread holds, no more: a state row is one register a thread.
  const int64_t rows = (a.k_head_dim + kDeltaWarps - 1) / kDeltaWarps;
  if (rows <= 8)
    launch("delta rule", delta_rule_kernel<8>, grid, kDeltaThreads, 0, stream, qkv, beta, alpha, M,
           a, state, out);
  else if (rows <= 16)
    launch("delta rule", delta_rule_kernel<16>, grid, kDeltaThreads, 0, stream, qkv, beta, alpha, M,
           a, state, out);
  else
    launch("delta rule", delta_rule_kernel<kDeltaRows>, grid, kDeltaThreads, 0, stream, qkv, beta,
           alpha, M, a, state, out);
}

}  // namespace ts::cuda
