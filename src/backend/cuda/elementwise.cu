// Row and elementwise kernels of the CUDA backend: all memory-bound, one pass each, f32 arithmetic
// written in the same order as the CPU backend's loops.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "backend/cuda/act_quant.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_store.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q6_rows.cuh"
#include "backend/cuda/q8_groups.cuh"
#include "backend/cuda/quant_device.cuh"
#include "backend/cuda/routed_sum.cuh"
#include "backend/cuda/row_ops.h"
#include "backend/cuda/warp.cuh"
#include "core/error.h"

namespace ts::cuda {
namespace {

constexpr int kThreads = 256;

// Grid for a grid-stride loop over n items: enough blocks to fill the device, never more than n
// needs.
unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65535));
}

// 16-byte vector loads and stores need 16-byte aligned addresses.
bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <DType T>
__global__ void embed_kernel(const uint8_t* table, size_t row_stride, int64_t cols,
                             WeightLayout layout, const int32_t* ids, float scale, float* out) {
  pdl_enter();
  const int64_t m = blockIdx.y;
  const int64_t e0 = 8 * (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (e0 >= cols) return;
  const uint8_t* row = table + static_cast<size_t>(ids[m]) * row_stride;
  float v[8];
  if (T == DType::Q8_0 && layout == WeightLayout::Q8Groups) {
    q8_group_dequant8(table, row_stride, cols, ids[m], e0, v);
  } else if (T == DType::Q6_K && layout == WeightLayout::Q6Rows) {
    q6_rows_dequant8(table, row_stride, cols, ids[m], e0, v);
  } else if constexpr (is_plain(T)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = e0 + k < cols ? plain_elem<T>(row, e0 + k) : 0.0f;
  } else {
    using B = BlockTraits<T>;
    dequant8<T>(row + (e0 / B::kElems) * B::kBytes, static_cast<int>(e0 % B::kElems), v);
  }
  float* o = out + m * cols;
#pragma unroll
  for (int k = 0; k < 8; ++k)
    if (e0 + k < cols) o[e0 + k] = scale != 1.0f ? v[k] * scale : v[k];
}

// One block per row; w has n elements (the same weight for every row). With `res`, each row of x
// first takes res's row (x += res, written back): add() then rms_norm() in one pass, the same bits.
__global__ void rms_norm_kernel(float* x, const float* res, const float* w, int64_t n, float eps,
                                bool plus_one, float* out) {
  pdl_enter();
  float* xr = x + blockIdx.x * n;
  const float* rr = res != nullptr ? res + blockIdx.x * n : nullptr;
  float* o = out + blockIdx.x * n;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = xr[i];
    if (rr != nullptr) xr[i] = v = v + rr[i];  // read back below by this same thread
    ss += v * v;
  }
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    o[i] = xr[i] * inv * (plus_one ? 1.0f + w[i] : w[i]);
}

// Rows of up to 4 * 1024 * kVec elements, 16-byte aligned: each thread keeps its kVec float4s in
// registers between the sum and the scaling, so a row is read from memory once, in one round of
// 16-byte loads (the hidden-state norm of decode is a single row: latency is all it costs). The
// residual added first is res's row, or with routed.y the sum of the row's routed experts
// (routed_sum.cuh: the experts' combine as a kernel of its own was a boundary and a memory round
// trip more a layer: docs/PERFORMANCE.md, "Measured choices"). With acts.q,
// the output is also written quantised for the int8 GEMV (act_quant.cuh): eight threads hold a
// 32-element block (n % 32 == 0).
template <int kVec>
__global__ void __launch_bounds__(1024)
    rms_norm_vec_kernel(float* x, const float* res, RoutedRows routed, const float* w, int64_t n,
                        float eps, bool plus_one, float* out, ActsView acts) {
  pdl_enter();
  auto* xr = reinterpret_cast<float4*>(x + blockIdx.x * n);
  const auto* rr = reinterpret_cast<const float4*>(res != nullptr ? res + blockIdx.x * n : nullptr);
  auto* o = reinterpret_cast<float4*>(out + blockIdx.x * n);
  const auto* w4 = reinterpret_cast<const float4*>(w);
  const int64_t n4 = n / 4;
  __shared__ int order[kMaxTopK];
  __shared__ float wt[kMaxTopK];
  if (routed.y != nullptr) routed_order(routed, blockIdx.x, order, wt);
  float4 v[kVec];
  float ss = 0;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    v[i] = j < n4 ? xr[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if ((rr != nullptr || routed.y != nullptr) && j < n4) {
      float4 r;
      if (rr != nullptr) {
        r = rr[j];
      } else {
        float sum[4];
        routed_sum<4>(routed, blockIdx.x, n, order, wt, 4 * j, sum);
        r = make_float4(sum[0], sum[1], sum[2], sum[3]);
      }
      v[i] = make_float4(v[i].x + r.x, v[i].y + r.y, v[i].z + r.z, v[i].w + r.w);
      xr[j] = v[i];
    }
    ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
  }
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    const bool live = j < n4;
    float4 y = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (live) {
      float4 g = w4[j];
      if (plus_one) g = make_float4(1.0f + g.x, 1.0f + g.y, 1.0f + g.z, 1.0f + g.w);
      y = make_float4(v[i].x * inv * g.x, v[i].y * inv * g.y, v[i].z * inv * g.z,
                      v[i].w * inv * g.w);
      o[j] = y;
    }
    if (acts.q != nullptr) {
      const float e[4] = {y.x, y.y, y.z, y.w};
      quantize_block_part<4>(e, live, static_cast<int64_t>(blockIdx.x) * n + 4 * j, acts);
    }
  }
}

__global__ void add_bias_kernel(float* y, const float* b, int64_t M, int64_t n) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < M * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] += b[i % n];
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] += x[i];
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] *= s;
}

// Row r = m * H + h of the M x H rows, one per blockIdx.y step.
__global__ void copy_heads_kernel(float* dst, int64_t dst_stride, int64_t dst_head,
                                  const float* src, int64_t src_stride, int64_t src_head, int64_t M,
                                  int64_t H, int64_t n) {
  pdl_enter();
  for (int64_t r = blockIdx.y; r < M * H; r += gridDim.y) {
    float* d = dst + r / H * dst_stride + r % H * dst_head;
    const float* s = src + r / H * src_stride + r % H * src_head;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
      d[i] = s[i];
  }
}

// The pair (x0, x1) rotated by the angle whose sine and cosine are s and c: the one expression of
// every rotation (so that they give the same bits).
__device__ __forceinline__ void rotate_values(float& x0, float& x1, float s, float c) {
  const float a = x0, b = x1;
  x0 = a * c - b * s;
  x1 = a * s + b * c;
}

// Pair i of a head (of `half` pairs) rotated by the angle whose sine and cosine are s and c.
__device__ __forceinline__ void rotate_pair(float* v, int64_t i, int64_t half, bool neox, float s,
                                            float c) {
  const int64_t a = neox ? i : 2 * i;
  const int64_t b = neox ? i + half : 2 * i + 1;
  float x0 = v[a], x1 = v[b];
  rotate_values(x0, x1, s, c);
  v[a] = x0;
  v[b] = x1;
}

// The position that rotates pair i of a row whose positions start at `pos`: its one position, or
// with M-RoPE (streams: each pair's stream) the pair's stream of the row's three (T, H, W).
__device__ __forceinline__ float pair_position(const int32_t* pos, const uint8_t* streams,
                                               int64_t i) {
  return static_cast<float>(streams != nullptr ? pos[streams[i]] : pos[0]);
}

// Rotates the pairs of one head of the row whose positions start at `pos`, the block's threads over
// the pairs. The angle is an f32 product as in PyTorch, so long positions round like the reference.
__device__ __forceinline__ void rotate_head(float* v, const int32_t* pos, const uint8_t* streams,
                                            int64_t half, bool neox, const float* inv_freq) {
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(pair_position(pos, streams, i) * inv_freq[i], &s, &c);
    rotate_pair(v, i, half, neox, s, c);
  }
}

// A row's positions: one, or three with M-RoPE.
__device__ __forceinline__ const int32_t* row_positions(const int32_t* pos, const uint8_t* streams,
                                                        int64_t m) {
  return pos + (streams != nullptr ? 3 * m : m);
}

// Prefill: one block per row. The angles depend on the position and the pair, not the head: each
// is computed once per row, then every head of the row is rotated with them (the same sincosf of
// the same product as rotate_head, so the same bits).
constexpr int kMaxRopeHalf = 128;  // pairs per head: head_dim <= 256
__global__ void rope_rows_kernel(float* x, int64_t n_heads, const int32_t* pos,
                                 const uint8_t* streams, int64_t head_dim, int64_t half, bool neox,
                                 const float* inv_freq) {
  pdl_enter();
  __shared__ float sin_[kMaxRopeHalf], cos_[kMaxRopeHalf];
  const int32_t* p = row_positions(pos, streams, blockIdx.x);
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x)
    sincosf(pair_position(p, streams, i) * inv_freq[i], &sin_[i], &cos_[i]);
  __syncthreads();
  float* row = x + static_cast<int64_t>(blockIdx.x) * n_heads * head_dim;
  for (int64_t e = threadIdx.x; e < n_heads * half; e += blockDim.x) {
    const int64_t h = e / half, i = e - h * half;
    rotate_pair(row + h * head_dim, i, half, neox, sin_[i], cos_[i]);
  }
}

// One block per (row, head).
__global__ void rope_kernel(float* x, int64_t n_heads, const int32_t* pos, const uint8_t* streams,
                            int64_t head_dim, int64_t half, bool neox, const float* inv_freq) {
  pdl_enter();
  const int64_t m = blockIdx.x / n_heads;
  float* v = x + static_cast<int64_t>(blockIdx.x) * head_dim;
  rotate_head(v, row_positions(pos, streams, m), streams, half, neox, inv_freq);
}

// One block per head of one row: q heads [0, n_q) with q_w, key heads after them with k_w. The norm
// is rms_norm_kernel's, with its thread count (same partial sums, same bits); the normed head goes
// back to memory so that each thread can then rotate any pair, as rope_kernel does.
__global__ void qk_norm_rope_kernel(float* x, const float* q_w, const float* k_w, int64_t n_q,
                                    int64_t head_dim, float eps, bool plus_one, const int32_t* pos,
                                    int64_t half, bool neox, const float* inv_freq) {
  pdl_enter();
  float* v = x + static_cast<int64_t>(blockIdx.x) * head_dim;
  const float* w = blockIdx.x < n_q ? q_w : k_w;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) ss += v[i] * v[i];
  ss = block_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(head_dim) + eps);
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x)
    v[i] = v[i] * inv * (plus_one ? 1.0f + w[i] : w[i]);
  __syncthreads();
  rotate_head(v, pos, nullptr, half, neox, inv_freq);
}

// act(g) * u, the one expression every GLU kernel uses (so that they give the same bits).
template <Glu A>
__device__ __forceinline__ float glu_unit(float g, float u) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  if constexpr (A == Glu::SiLU) {
    return g / (1.0f + expf(-g)) * u;
  } else if constexpr (A == Glu::Sigmoid) {
    return u / (1.0f + expf(-g));  // an attention output gate, in the CPU's form
  } else {  // GELU with the tanh approximation, as PyTorch's gelu(approximate='tanh')
    return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
  }
}

// The decode's one token of q, k and v heads side by side (n_q query heads, n_k key heads, n_k
// value heads), one warp per head with the head in registers. With q_w / k_w (neox pairs only) the
// query and key heads are normed per head with rms_norm_kernel's sums for 32 threads (same bits);
// both are rotated as rope_kernel does (the same angles and rotation: same bits) and written back;
// the key and value heads then go into the cache row pos[0] as kv_store_kernel writes it. Heads of
// 32 * kPer elements, fully rotated. With neox pairs (i, i + half) lane l holds elements l, l + 32,
// ..., so that a pair is in one lane and a q8_0 block is one register of every lane; with adjacent
// pairs (2i, 2i + 1), elements kPer l .. kPer l + kPer - 1. The weights and frequencies are loaded
// before the wait for the kernel ahead, the head in one round trip: the block-wide norm spent its
// time on dependent memory trips, and the store as a kernel of its own added a kernel boundary
// (docs/PERFORMANCE.md, "Measured choices").
template <int kPer, bool kNeox, DType T>
__global__ void __launch_bounds__(32)
    rope_kv_store_kernel(float* x, const float* q_w, const float* k_w, int n_q, int n_k, float eps,
                         bool plus_one, const int32_t* pos, const float* inv_freq, uint8_t* kc,
                         uint8_t* vc, size_t row_bytes) {
  constexpr int kHalf = kPer / 2;
  const int lane = static_cast<int>(threadIdx.x), head = static_cast<int>(blockIdx.x);
  const bool value = head >= n_q + n_k, norm = kNeox && q_w != nullptr && !value;
  const auto at = [lane](int j) { return kNeox ? lane + 32 * j : lane * kPer + j; };
  float wv[kPer], freq[kHalf], e[kPer];
  if (norm) {
    const float* w = head < n_q ? q_w : k_w;
#pragma unroll
    for (int j = 0; j < kPer; ++j) wv[j] = w[at(j)];
  }
  if (!value) {
#pragma unroll
    for (int j = 0; j < kHalf; ++j) freq[j] = inv_freq[kNeox ? lane + 32 * j : lane * kHalf + j];
  }
  pdl_enter();
  float* v = x + static_cast<int64_t>(head) * 32 * kPer;
#pragma unroll
  for (int j = 0; j < kPer; ++j) e[j] = v[at(j)];
  if (norm) {
    float ss = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) ss += e[j] * e[j];
    const float inv = 1.0f / sqrtf(warp_sum(ss) / static_cast<float>(32 * kPer) + eps);
#pragma unroll
    for (int j = 0; j < kPer; ++j) e[j] = e[j] * inv * (plus_one ? 1.0f + wv[j] : wv[j]);
  }
  const int32_t p = pos[0];
  if (!value) {
#pragma unroll
    for (int j = 0; j < kHalf; ++j) {
      float s, c;
      sincosf(static_cast<float>(p) * freq[j], &s, &c);
      if constexpr (kNeox)
        rotate_values(e[j], e[j + kHalf], s, c);
      else
        rotate_values(e[2 * j], e[2 * j + 1], s, c);
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) v[at(j)] = e[j];
  }
  if (head < n_q) return;
  uint8_t* row = (value ? vc : kc) + static_cast<size_t>(p) * row_bytes;
  const int64_t first = static_cast<int64_t>(head - n_q - (value ? n_k : 0)) * 32 * kPer;
  float amax[kPer] = {};
  if constexpr (T == DType::Q8_0) {
    if constexpr (kNeox) {  // block j is element j of every lane
#pragma unroll
      for (int j = 0; j < kPer; ++j) amax[j] = warp_max(fabsf(e[j]));
    } else {  // a block is 32 / kPer adjacent lanes
      float m = 0.0f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) m = fmaxf(m, fabsf(e[j]));
      for (int off = 16 / kPer; off > 0; off >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
#pragma unroll
      for (int j = 0; j < kPer; ++j) amax[j] = m;
    }
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) put_kv<T>(row, first + at(j), e[j], amax[j]);
}

// Element i of row r: gate[r * stride + i], up likewise; out is [rows][n].
template <Glu A>
__global__ void glu_kernel(const float* gate, const float* up, int64_t rows, int64_t n,
                           int64_t stride, float* out) {
  pdl_enter();
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < rows * n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / n, at = r * stride + (e - r * n);
    out[e] = glu_unit<A>(gate[at], up[at]);
  }
}

// Row blockIdx.y, four elements per thread with 16-byte loads and stores, no 64-bit division per
// element (which held glu_kernel far below the copy bandwidth: docs/PERFORMANCE.md, "Measured
// choices"). With acts.q, the output is
// also written quantised for the int8 GEMV (act_quant.cuh): eight threads hold a 32-element block
// (n % 32 == 0).
template <Glu A>
__global__ void glu_rows_kernel(const float4* gate, const float4* up, int64_t n4, int64_t stride4,
                                float4* out, ActsView acts) {
  pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const bool live = i < n4;
  if (!live && acts.q == nullptr) return;
  float4 y = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (live) {
    const int64_t at = blockIdx.y * stride4 + i;
    const float4 g = gate[at], u = up[at];
    y = float4{glu_unit<A>(g.x, u.x), glu_unit<A>(g.y, u.y), glu_unit<A>(g.z, u.z),
               glu_unit<A>(g.w, u.w)};
    out[blockIdx.y * n4 + i] = y;
  }
  if (acts.q != nullptr) {
    const float e[4] = {y.x, y.y, y.z, y.w};
    quantize_block_part<4>(e, live, 4 * (blockIdx.y * n4 + i), acts);
  }
}

// Row blockIdx.y (and every gridDim.y-th after it), its gate computed once for the row.
__global__ void add_gated_rows_kernel(float* y, const float* x, const float* g, int64_t M,
                                      int64_t n) {
  pdl_enter();
  for (int64_t m = blockIdx.y; m < M; m += gridDim.y) {
    const float s = 1.0f / (1.0f + expf(-g[m]));
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
      y[m * n + i] += s * x[m * n + i];
  }
}

// One thread per column, rows taken in order: rows that share a destination add up in the same
// order as on the CPU, with no atomics.
__global__ void scatter_add_rows_kernel(float* y, const float* x, const int32_t* idx,
                                        const float* scale, int64_t M, int64_t n) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    for (int64_t m = 0; m < M; ++m)
      y[static_cast<int64_t>(idx[m]) * n + i] =
          fmaf(scale[m], x[m * n + i], y[static_cast<int64_t>(idx[m]) * n + i]);
}

// One block row per destination: each thread keeps its column's sum in a register over the
// destination's source rows, the same fused multiply-adds in the same order as above.
__global__ void scatter_add_sorted_kernel(float* y, const float* x, const int32_t* dst,
                                          const int32_t* off, const int32_t* src,
                                          const float* scale, int64_t n) {
  pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float* out = y + static_cast<int64_t>(dst[blockIdx.y]) * n + i;
  float acc = *out;
  for (int j = off[blockIdx.y]; j < off[blockIdx.y + 1]; ++j)
    acc = fmaf(scale[src[j]], x[static_cast<int64_t>(src[j]) * n + i], acc);
  *out = acc;
}

__global__ void gather_rows_kernel(const float* x, const int32_t* idx, int64_t M, int64_t n,
                                   float* out) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < M * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = x[static_cast<int64_t>(idx[i / n]) * n + i % n];
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = cap * tanhf(x[i] / cap);
}

template <class Out>
__device__ __forceinline__ Out round_to(float v) {
  if constexpr (std::is_same_v<Out, __half>)
    return __float2half_rn(v);
  else
    return __float2bfloat16_rn(v);
}

template <class Out>
__global__ void convert_kernel(const float* x, int64_t n, Out* out) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = round_to<Out>(x[i]);
}

// Eight elements per thread: two 16-byte loads, one 16-byte store. Each element rounds as in
// convert_kernel; a prefill layer converts ~20 M activations, which one element per thread moved
// at a third of the copy bandwidth.
template <class Out>
__global__ void convert8_kernel(const float4* x, int64_t n8, uint4* out) {
  pdl_enter();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n8;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 a = x[2 * i], b = x[2 * i + 1];
    __align__(16)
        Out h[8] = {round_to<Out>(a.x), round_to<Out>(a.y), round_to<Out>(a.z), round_to<Out>(a.w),
                    round_to<Out>(b.x), round_to<Out>(b.y), round_to<Out>(b.z), round_to<Out>(b.w)};
    out[i] = *reinterpret_cast<const uint4*>(h);
  }
}

// Eight elements per thread, written as one 16-byte store of halves.
template <DType T>
__global__ void dequant_rows_f16_kernel(const uint8_t* w, size_t row_stride, int64_t cols,
                                        WeightLayout layout, int64_t r0, __half* out,
                                        const void* const* experts, int64_t expert_elems) {
  pdl_enter();
  if (experts != nullptr) {  // a batch of experts: blockIdx.z's weight, into its own slot
    w = static_cast<const uint8_t*>(experts[blockIdx.z]);
    out += blockIdx.z * expert_elems;
  }
  using B = BlockTraits<T>;
  const int64_t r = blockIdx.y;
  const int64_t e0 = 8 * (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (e0 >= cols) return;
  float v[8];
  if (T == DType::Q8_0 && layout == WeightLayout::Q8Groups)
    q8_group_dequant8(w, row_stride, cols, r0 + r, e0, v);
  else if (T == DType::Q6_K && layout == WeightLayout::Q6Rows)
    q6_rows_dequant8(w, row_stride, cols, r0 + r, e0, v);
  else
    dequant8<T>(w + (r0 + r) * row_stride + (e0 / B::kElems) * B::kBytes,
                static_cast<int>(e0 % B::kElems), v);
  __align__(16) __half h[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) h[k] = __float2half_rn(v[k]);
  *reinterpret_cast<uint4*>(out + r * cols + e0) = *reinterpret_cast<const uint4*>(h);
}

}  // namespace

void launch_embed(const Weight& table, const int32_t* ids, int64_t M, float scale, float* out,
                  cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((table.cols + 8 * 128 - 1) / (8 * 128)),
                  static_cast<unsigned>(M));
  const bool known = dispatch_weight_type(table.dtype, [&]<DType T>() {
    launch("embed", embed_kernel<T>, grid, 128, 0, stream, static_cast<const uint8_t*>(table.data),
           table.row_stride, table.cols, table.layout, ids, scale, out);
  });
  if (!known)
    fail(ErrorKind::Unsupported,
         std::string("embed: table type ") + dtype_name(table.dtype) + " has no CUDA kernel");
}

namespace {

// Threads of rms_norm_kernel for rows of n: 32 per 128 elements, between one and eight warps, so
// that short rows (q/k heads) don't idle a big block and long rows get enough loads in flight.
int norm_threads(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + 127) / 128 * 32, 32, 256));
}

// True when rms_norm_rows takes rms_norm_vec_kernel.
bool norm_vectorised(int64_t n) {
  return n % 4 == 0 && n / 4 >= 256 && n / 4 <= 4 * 1024;
}

// Whether rms_norm_rows takes rms_norm_vec_kernel for these rows.
bool norm_vec_rows(const float* x, const float* w, const float* out, const float* res, int64_t n) {
  return norm_vectorised(n) && aligned(x) && aligned(w) && aligned(out) &&
         (res == nullptr || aligned(res));
}

// Quantising for the int8 GEMV takes the vectorised kernel and whole 32-element blocks; so does
// the routed experts' sum (routed.y, with res null), which only that kernel adds.
bool rms_norm_rows(float* x, const float* res, const RoutedRows& routed, const float* w,
                   int64_t rows, int64_t n, float eps, bool plus_one, float* out, void* acts,
                   cudaStream_t stream) {
  const int64_t n4 = n / 4;
  if (norm_vec_rows(x, w, out, res != nullptr ? res : routed.y, n)) {
    const int threads = static_cast<int>(std::min<int64_t>((n4 + 31) / 32 * 32, 1024));
    const int64_t per_thread = (n4 + threads - 1) / threads;
    const auto grid = static_cast<unsigned>(rows);
    const ActsView a = acts != nullptr && n % 32 == 0 ? acts_view(acts, rows * n) : ActsView{};
    const auto run = [&](auto kernel) {
      launch("rms norm vec", kernel, grid, threads, 0, stream, x, res, routed, w, n, eps, plus_one,
             out, a);
    };
    if (per_thread == 1)
      run(rms_norm_vec_kernel<1>);
    else if (per_thread == 2)
      run(rms_norm_vec_kernel<2>);
    else
      run(rms_norm_vec_kernel<4>);
    return a.q != nullptr;
  }
  const int threads = norm_threads(n);
  launch("rms norm", rms_norm_kernel, static_cast<unsigned>(rows), threads, 0, stream, x, res, w, n,
         eps, plus_one, out);
  return false;
}

}  // namespace

// Without a residual the kernels only read x.
bool launch_rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps,
                     bool plus_one, float* out, cudaStream_t stream, void* acts) {
  return rms_norm_rows(const_cast<float*>(x), nullptr, RoutedRows{}, w, rows, n, eps, plus_one, out,
                       acts, stream);
}

bool launch_add_rms_norm(float* x, const float* res, const float* w, int64_t rows, int64_t n,
                         float eps, bool plus_one, float* out, cudaStream_t stream, void* acts) {
  return rms_norm_rows(x, res, RoutedRows{}, w, rows, n, eps, plus_one, out, acts, stream);
}

bool combine_add_rms_norm_fused(const RoutedRows& r, const float* x, const float* w, int64_t n,
                                const float* out) {
  return norm_vec_rows(x, w, out, r.y, n);
}

bool launch_combine_add_rms_norm(const RoutedRows& r, float* x, const float* w, int64_t rows,
                                 int64_t n, float eps, bool plus_one, float* out,
                                 cudaStream_t stream, void* acts) {
  return rms_norm_rows(x, nullptr, r, w, rows, n, eps, plus_one, out, acts, stream);
}

// The fused kernel reproduces the general norm kernel only; rope's thread count does not matter
// (one pair per thread per step either way).
bool qk_norm_rope_fused(int64_t head_dim) {
  return !norm_vectorised(head_dim);
}

void launch_qk_norm_rope(float* qk, const float* q_w, const float* k_w, int64_t n_q, int64_t n_k,
                         float eps, bool plus_one, const int32_t* pos, const RopeArgs& r,
                         cudaStream_t stream) {
  launch("qk norm rope", qk_norm_rope_kernel, static_cast<unsigned>(n_q + n_k),
         norm_threads(r.head_dim), 0, stream, qk, q_w, k_w, n_q, r.head_dim, eps, plus_one, pos,
         r.rotary_dim / 2, r.neox, r.inv_freq);
}

bool rope_kv_store_fused(const RopeArgs& r, bool norm) {
  return r.rotary_dim == r.head_dim && (r.head_dim == 64 || r.head_dim == 128) && (r.neox || !norm);
}

void launch_rope_kv_store(float* qkv, const float* q_w, const float* k_w, int64_t n_q, int64_t n_k,
                          float eps, bool plus_one, const int32_t* pos, const RopeArgs& r,
                          const KvView& kv, cudaStream_t stream) {
  const auto heads = static_cast<unsigned>(n_q + 2 * n_k);
  auto* kc = static_cast<uint8_t*>(kv.k);
  auto* vc = static_cast<uint8_t*>(kv.v);
  const auto run = [&]<int kPer, bool kNeox, DType T>() {
    launch("rope kv store", rope_kv_store_kernel<kPer, kNeox, T>, heads, 32, 0, stream, qkv, q_w,
           k_w, static_cast<int>(n_q), static_cast<int>(n_k), eps, plus_one, pos, r.inv_freq, kc,
           vc, kv.row_bytes);
  };
  dispatch_kv_type(kv.dtype, [&]<DType T>() {
    if (r.head_dim == 64)
      r.neox ? run.template operator()<2, true, T>() : run.template operator()<2, false, T>();
    else
      r.neox ? run.template operator()<4, true, T>() : run.template operator()<4, false, T>();
  });
}

void launch_add_bias(float* y, const float* b, int64_t M, int64_t n, cudaStream_t stream) {
  launch("add bias", add_bias_kernel, grid_for(M * n), kThreads, 0, stream, y, b, M, n);
}

void launch_add(float* y, const float* x, int64_t n, cudaStream_t stream) {
  launch("add", add_kernel, grid_for(n), kThreads, 0, stream, y, x, n);
}

void launch_scale(float* x, int64_t n, float s, cudaStream_t stream) {
  launch("scale", scale_kernel, grid_for(n), kThreads, 0, stream, x, n, s);
}

void launch_copy_heads(float* dst, int64_t dst_stride, int64_t dst_head, const float* src,
                       int64_t src_stride, int64_t src_head, int64_t M, int64_t H, int64_t n,
                       cudaStream_t stream) {
  const dim3 grid(
      static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535)),
      static_cast<unsigned>(std::clamp<int64_t>(M * H, 1, 65535)));
  launch("copy heads", copy_heads_kernel, grid, kThreads, 0, stream, dst, dst_stride, dst_head, src,
         src_stride, src_head, M, H, n);
}

void launch_rope(float* x, int64_t M, int64_t n_heads, const int32_t* pos, const uint8_t* streams,
                 const RopeArgs& r, cudaStream_t stream) {
  const int64_t half = r.rotary_dim / 2;
  if (M > 1 && half <= kMaxRopeHalf) {
    launch("rope rows", rope_rows_kernel, static_cast<unsigned>(M), kThreads, 0, stream, x, n_heads,
           pos, streams, r.head_dim, half, r.neox, r.inv_freq);
    return;
  }
  const int threads = static_cast<int>(std::clamp<int64_t>((half + 31) / 32 * 32, 32, 128));
  launch("rope", rope_kernel, static_cast<unsigned>(M * n_heads), threads, 0, stream, x, n_heads,
         pos, streams, r.head_dim, half, r.neox, r.inv_freq);
}

namespace {

// f.template operator()<A>() for the activation act, each one named: a new Glu that is not
// added here fails loudly instead of running as another activation.
template <class F>
void with_glu(Glu act, F&& f) {
  switch (act) {
    case Glu::SiLU:
      f.template operator()<Glu::SiLU>();
      return;
    case Glu::GeluTanh:
      f.template operator()<Glu::GeluTanh>();
      return;
    case Glu::Sigmoid:
      f.template operator()<Glu::Sigmoid>();
      return;
  }
  fail(ErrorKind::Unsupported, "glu: unknown activation");
}

template <Glu A>
void glu_rows(const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
              float* out, ActsView acts, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n / 4 + kThreads - 1) / kThreads),
                  static_cast<unsigned>(rows));
  launch("glu rows", glu_rows_kernel<A>, grid, kThreads, 0, stream,
         reinterpret_cast<const float4*>(gate), reinterpret_cast<const float4*>(up), n / 4,
         stride / 4, reinterpret_cast<float4*>(out), acts);
}

}  // namespace

// Many rows take glu_rows_kernel, and so does one that is quantised for the int8 GEMV; one row
// otherwise glu_kernel.
bool launch_glu(Glu act, const float* gate, const float* up, int64_t rows, int64_t n,
                int64_t stride, float* out, cudaStream_t stream, void* acts) {
  const bool quantise = acts != nullptr && n % 32 == 0;
  if ((rows > 1 || quantise) && rows <= 65535 && n % 4 == 0 && stride % 4 == 0 && aligned(gate) &&
      aligned(up) && aligned(out)) {
    const ActsView a = quantise ? acts_view(acts, rows * n) : ActsView{};
    with_glu(act, [&]<Glu A>() { glu_rows<A>(gate, up, rows, n, stride, out, a, stream); });
    return quantise;
  }
  with_glu(act, [&]<Glu A>() {
    launch("glu", glu_kernel<A>, grid_for(rows * n), kThreads, 0, stream, gate, up, rows, n, stride,
           out);
  });
  return false;
}

namespace {

__global__ void glu_clamped_kernel(const float* gate, const float* up, int64_t rows, int64_t n,
                                   int64_t stride, ClampedSwiGlu p, float* out) {
  pdl_enter();
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < rows * n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / n, at = r * stride + (e - r * n);
    const float g = fminf(gate[at], p.limit);
    const float u = fminf(fmaxf(up[at], -p.limit), p.limit);
    const float glu = g * (1.0f / (1.0f + expf(-(g * p.alpha))));
    out[e] = (u + 1.0f) * glu;
  }
}

}  // namespace

void launch_glu_clamped(const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
                        const ClampedSwiGlu& p, float* out, cudaStream_t stream) {
  launch("glu clamped", glu_clamped_kernel, grid_for(rows * n), kThreads, 0, stream, gate, up, rows,
         n, stride, p, out);
}

void launch_add_gated_rows(float* y, const float* x, const float* g, int64_t M, int64_t n,
                           cudaStream_t stream) {
  const dim3 grid(grid_for(n), static_cast<unsigned>(std::clamp<int64_t>(M, 1, 65535)));
  launch("add gated rows", add_gated_rows_kernel, grid, kThreads, 0, stream, y, x, g, M, n);
}

void launch_scatter_add_rows(float* y, const float* x, const int32_t* idx, const float* scale,
                             int64_t M, int64_t n, cudaStream_t stream) {
  launch("scatter add rows", scatter_add_rows_kernel, grid_for(n), kThreads, 0, stream, y, x, idx,
         scale, M, n);
}

void launch_scatter_add_sorted(float* y, const float* x, const int32_t* dst, const int32_t* off,
                               const int32_t* src, const float* scale, int64_t D, int64_t n,
                               cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n + kThreads - 1) / kThreads), static_cast<unsigned>(D));
  launch("scatter add sorted", scatter_add_sorted_kernel, grid, kThreads, 0, stream, y, x, dst, off,
         src, scale, n);
}

void launch_gather_rows(const float* x, const int32_t* idx, int64_t M, int64_t n, float* out,
                        cudaStream_t stream) {
  launch("gather rows", gather_rows_kernel, grid_for(M * n), kThreads, 0, stream, x, idx, M, n,
         out);
}

void launch_softcap(float* x, int64_t n, float cap, cudaStream_t stream) {
  launch("softcap", softcap_kernel, grid_for(n), kThreads, 0, stream, x, n, cap);
}

namespace {

template <class Out>
void convert_f32(const float* x, int64_t n, Out* out, cudaStream_t stream) {
  if (n % 8 == 0 && aligned(x) && aligned(out)) {
    launch("convert activations", convert8_kernel<Out>, grid_for(n / 8), kThreads, 0, stream,
           reinterpret_cast<const float4*>(x), n / 8, reinterpret_cast<uint4*>(out));
  } else {
    launch("convert activations", convert_kernel<Out>, grid_for(n), kThreads, 0, stream, x, n, out);
  }
}

}  // namespace

void launch_convert_f32(const float* x, int64_t n, DType to, void* out, cudaStream_t stream) {
  if (to == DType::F16)
    convert_f32(x, n, static_cast<__half*>(out), stream);
  else
    convert_f32(x, n, static_cast<__nv_bfloat16*>(out), stream);
}

namespace {

// Rows [r0, r0 + rows) of w, or of each of n experts laid out like w (experts: their table), as
// f16.
void launch_dequant_f16(const Weight& w, int64_t r0, int64_t rows, int64_t n,
                        const void* const* experts, void* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.cols + 8 * 128 - 1) / (8 * 128)),
                  static_cast<unsigned>(rows), static_cast<unsigned>(n));
  const bool known = dispatch_weight_type(w.dtype, [&]<DType T>() {
    if constexpr (!is_plain(T))
      launch("dequant rows f16", dequant_rows_f16_kernel<T>, grid, 128, 0, stream,
             static_cast<const uint8_t*>(w.data), w.row_stride, w.cols, w.layout, r0,
             static_cast<__half*>(out), experts, w.rows * w.cols);
  });
  if (!known || is_plain(w.dtype))
    fail(ErrorKind::Unsupported,
         std::string("matmul: no dequantising kernel for ") + dtype_name(w.dtype));
}

}  // namespace

void launch_dequant_rows_f16(const Weight& w, int64_t r0, int64_t r1, void* out,
                             cudaStream_t stream) {
  launch_dequant_f16(w, r0, r1 - r0, 1, nullptr, out, stream);
}

void launch_dequant_experts_f16(const Weight& shape, const void* const* experts, int64_t n,
                                void* out, cudaStream_t stream) {
  launch_dequant_f16(shape, 0, shape.rows, n, experts, out, stream);
}

}  // namespace ts::cuda
