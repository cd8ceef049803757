// Causal attention over the KV cache, f32 arithmetic whatever the cache type.
//
// Decode (one query row, or one of each of several sequences, each over its own cache):
// flash-decoding. The keys of each head are cut into ranges of about kSplitKeys, at most `splits`;
// one block per (head, range) keeps a running max / denominator / output per warp (online
// softmax), merges its warps, and writes the partial (max, denominator, output); the last block of
// the head to finish merges the ranges. `splits` gives every multiprocessor several blocks at long
// contexts even for a handful of heads.
//
// Prefill (many query rows): f16 and bf16 caches of the common head sizes go to the tensor-core
// kernel of attention_mma.cu. Everything else (f32 caches, whose results must stay exact; q8_0;
// other head sizes) takes the f32 kernel here: one block per (32 query rows, head) walks the keys
// in tiles of 32 staged in shared memory as f32: scores with one key per lane, online softmax per
// row, and the output accumulated with one head dimension per lane.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <string>

#include "backend/cuda/attention_mma.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_device.cuh"
#include "core/error.h"

namespace ts::cuda {
namespace {

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

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

// Keys [lo, hi) that query position p may see.
__device__ __forceinline__ void key_range(int32_t p, int64_t window, int64_t& lo, int64_t& hi) {
  hi = static_cast<int64_t>(p) + 1;
  lo = window > 0 ? max(int64_t{0}, hi - window) : 0;
}

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
};

// ---- decode ----

constexpr int kDecodeWarps = 4;
// Keys of one key range of a decode (attn_decode_kernel): two steps of its warps.
constexpr int64_t kSplitKeys = 32;
// The decode scratch starts with a counter per head (blocks done), zero between launches, then the
// partials; room for kMaxDecodeHeads heads.
constexpr size_t kDoneBytes = kMaxDecodeHeads * sizeof(int);

// Merges head h's `splits` partials (max, denominator, output) into its output row. Each split's
// max and denominator are read once, in parallel, into shared memory: read in the loops, each
// would be an L2 round trip in a dependent chain.
__device__ void combine_splits(const float* ph, int splits, int D, float* out) {
  __shared__ float sm[kMaxDecodeSplits], sl[kMaxDecodeSplits];
  for (int s = threadIdx.x; s < splits; s += blockDim.x) {
    sm[s] = __ldcg(ph + s * (D + 2));
    sl[s] = __ldcg(ph + s * (D + 2) + 1);
  }
  __syncthreads();
  float mx = -FLT_MAX;
  for (int s = 0; s < splits; ++s)
    if (sl[s] > 0.0f) mx = fmaxf(mx, sm[s]);
  float den = 0.0f;
  for (int s = 0; s < splits; ++s)
    if (sl[s] > 0.0f) den += sl[s] * expf(sm[s] - mx);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
#pragma unroll 4
    for (int s = 0; s < splits; ++s)
      if (sl[s] > 0.0f) o += __ldcg(ph + s * (D + 2) + 2 + d) * expf(sm[s] - mx);
    out[d] = o / den;
  }
}

// Lane l holds head dimensions l * E .. l * E + E - 1 (E = head_dim / 32 rounded up to a power of
// 2). Block (h, s, r): head h, key range s of query row r, over p's cache or each[r].
template <DType T, int E>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    attn_decode_kernel(AttnParams p, const KvView* each, int splits, int* done, float* partials,
                       float* head_out) {
  pdl_enter();
  const int h = blockIdx.x, s = blockIdx.y, r = blockIdx.z;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int D = p.head_dim;
  if (each != nullptr) {
    p.k = static_cast<const uint8_t*>(each[r].k);
    p.v = static_cast<const uint8_t*>(each[r].v);
  }
  // Row r's heads are heads r * n_head .. of the launch: its own counters, partials and output.
  const int64_t row_heads = static_cast<int64_t>(r) * p.n_head;
  p.q += row_heads * D;
  head_out += row_heads * D;
  done += row_heads;
  partials += row_heads * splits * (D + 2);
  const int64_t kv_off = static_cast<int64_t>(h / p.group) * D;
  int64_t lo, hi;
  key_range(p.pos[r], p.window, lo, hi);
  // The ranges this row's keys take: one per kSplitKeys keys, at most `splits` (the grid, fixed so
  // that a recorded step replays at any position). The others' blocks leave at once: a short
  // context is not spread over ranges of a few keys each, whose partials would cost more to write
  // and merge than their keys.
  const int ranges = static_cast<int>(
      min(static_cast<int64_t>(splits), max(int64_t{1}, (hi - lo + kSplitKeys - 1) / kSplitKeys)));
  if (s >= ranges) return;
  const int64_t per = (hi - lo + ranges - 1) / ranges;
  const int64_t j0 = lo + s * per, j1 = min(hi, j0 + per);

  float qv[E], acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int d = lane * E + e;
    qv[e] = d < D ? p.q[static_cast<int64_t>(h) * D + d] : 0.0f;
    acc[e] = 0.0f;
  }
  // Keys per warp per step (fewer for 256-wide heads, whose K and V rows already take 16 registers
  // each).
  constexpr int kDecodeKeys = E >= 8 ? 2 : 4;
  float m = -FLT_MAX, l = 0.0f;
  // kDecodeKeys keys per warp per step: their K and V loads are all in flight before the first
  // is used, instead of one memory latency per key.
  for (int64_t j = j0 + warp * kDecodeKeys; j < j1; j += kDecodeWarps * kDecodeKeys) {
    float kk[kDecodeKeys][E], vv[kDecodeKeys][E];
#pragma unroll
    for (int u = 0; u < kDecodeKeys; ++u) {
      const bool key = j + u < j1;
      const uint8_t* krow = p.k + static_cast<size_t>(j + u) * p.row_bytes;
      const uint8_t* vrow = p.v + static_cast<size_t>(j + u) * p.row_bytes;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int d = lane * E + e;
        const bool in = key && d < D;
        kk[u][e] = in ? kv_elem<T>(krow, kv_off + d) : 0.0f;
        vv[u][e] = in ? kv_elem<T>(vrow, kv_off + d) : 0.0f;
      }
    }
    float dot[kDecodeKeys];
#pragma unroll
    for (int u = 0; u < kDecodeKeys; ++u) {
      dot[u] = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) dot[u] += qv[e] * kk[u][e];
    }
#pragma unroll
    for (int u = 0; u < kDecodeKeys; ++u) dot[u] = warp_sum(dot[u]);
#pragma unroll
    for (int u = 0; u < kDecodeKeys; ++u) {
      if (j + u >= j1) break;
      const float sc = cap_score(dot[u] * p.scale, p.softcap);
      const float m_new = fmaxf(m, sc);
      const float corr = expf(m - m_new), w = expf(sc - m_new);
      l = l * corr + w;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[e] = acc[e] * corr + w * vv[u][e];
      m = m_new;
    }
  }

  // Merge the warps (a warp that saw no key has l = 0 and contributes nothing).
  __shared__ float wm[kDecodeWarps], wl[kDecodeWarps];
  __shared__ float wacc[kDecodeWarps][32 * E];
  if (lane == 0) wm[warp] = m, wl[warp] = l;
#pragma unroll
  for (int e = 0; e < E; ++e) wacc[warp][lane * E + e] = acc[e];
  __syncthreads();
  float mx = -FLT_MAX;
  for (int w = 0; w < kDecodeWarps; ++w)
    if (wl[w] > 0.0f) mx = fmaxf(mx, wm[w]);
  float* out = partials + (static_cast<int64_t>(h) * splits + s) * (D + 2);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kDecodeWarps; ++w)
      if (wl[w] > 0.0f) o += wacc[w][d] * expf(wm[w] - mx);
    out[2 + d] = o;
  }
  if (threadIdx.x == 0) {
    float den = 0.0f;
    for (int w = 0; w < kDecodeWarps; ++w)
      if (wl[w] > 0.0f) den += wl[w] * expf(wm[w] - mx);
    out[0] = mx;
    out[1] = den;
  }
  // The last of the head's blocks to finish merges the splits (one kernel fewer per layer). Its
  // counter goes back to 0 for the next launch.
  __shared__ bool last;
  __threadfence();  // this block's partial is visible to whichever block merges
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(done + h, 1) == ranges - 1;
    if (last) done[h] = 0;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  combine_splits(partials + static_cast<int64_t>(h) * splits * (D + 2), ranges, D,
                 head_out + static_cast<int64_t>(h) * D);
}

// ---- prefill ----

constexpr int kTileQ = 32;  // query rows per block: 8 warps x 4 rows
constexpr int kTileK = 32;  // keys per tile: one per lane
constexpr int kRowsPerWarp = 4;
constexpr int kPrefillThreads = 256;

// Shared memory: Q [32][D], K [32][D + 1] (the pad puts lane j's key on its own bank), V [32][D].
size_t prefill_smem_bytes(int D) {
  return sizeof(float) * (static_cast<size_t>(kTileQ) * D + static_cast<size_t>(kTileK) * (D + 1) +
                          static_cast<size_t>(kTileK) * D);
}

// Lane l holds head dimensions l, l + 32, ... (E of them) of its warp's four rows.
template <DType T, int E>
__global__ void __launch_bounds__(kPrefillThreads) attn_prefill_kernel(AttnParams p, float* out) {
  pdl_enter();
  extern __shared__ float smem[];
  const int D = p.head_dim;
  float* qs = smem;
  float* ks = qs + kTileQ * D;
  float* vs = ks + kTileK * (D + 1);
  __shared__ int64_t tile_lo, tile_hi;
  const int h = blockIdx.y;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTileQ;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t kv_off = static_cast<int64_t>(h / p.group) * D;
  const int64_t q_stride = static_cast<int64_t>(p.n_head) * D;

  for (int i = threadIdx.x; i < kTileQ * D; i += blockDim.x) {
    const int64_t m = m0 + i / D;
    qs[i] = m < p.M ? p.q[m * q_stride + static_cast<int64_t>(h) * D + i % D] : 0.0f;
  }
  // The block's key range: the union of its rows' ranges.
  if (warp == 0) {
    int64_t lo = INT64_MAX, hi = 0;
    if (m0 + lane < p.M) key_range(p.pos[m0 + lane], p.window, lo, hi);
    for (int off = 16; off > 0; off >>= 1) {
      lo = min(lo,
               static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(lo), off)));
      hi = max(hi,
               static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(hi), off)));
    }
    if (lane == 0) tile_lo = lo, tile_hi = hi;
  }

  int64_t row_lo[kRowsPerWarp], row_hi[kRowsPerWarp];
  float m_run[kRowsPerWarp], l_run[kRowsPerWarp], acc[kRowsPerWarp][E];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t m = m0 + warp * kRowsPerWarp + i;
    row_lo[i] = 0, row_hi[i] = 0;
    if (m < p.M) key_range(p.pos[m], p.window, row_lo[i], row_hi[i]);
    m_run[i] = -FLT_MAX, l_run[i] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[i][e] = 0.0f;
  }
  __syncthreads();
  const int64_t k_begin = tile_lo, k_end = tile_hi;

  for (int64_t k0 = k_begin; k0 < k_end; k0 += kTileK) {
    __syncthreads();  // the previous tile's K/V are no longer read
    for (int i = threadIdx.x; i < kTileK * D; i += blockDim.x) {
      const int j = i / D, d = i % D;
      const int64_t key = k0 + j;
      float kval = 0.0f, vval = 0.0f;
      if (key < k_end) {
        kval = kv_elem<T>(p.k + static_cast<size_t>(key) * p.row_bytes, kv_off + d);
        vval = kv_elem<T>(p.v + static_cast<size_t>(key) * p.row_bytes, kv_off + d);
      }
      ks[j * (D + 1) + d] = kval;
      vs[j * D + d] = vval;
    }
    __syncthreads();

    // Scores: lane = key, four rows per warp.
    const int64_t key = k0 + lane;
    float sc[kRowsPerWarp] = {};
    const float* krow = ks + lane * (D + 1);
    const float* q0 = qs + (warp * kRowsPerWarp) * D;
    for (int d = 0; d < D; ++d) {
      const float kd = krow[d];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) sc[i] += q0[i * D + d] * kd;
    }
    float pr[kRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const bool valid = key >= row_lo[i] && key < row_hi[i];
      const float s = valid ? cap_score(sc[i] * p.scale, p.softcap) : -FLT_MAX;
      const float m_new = fmaxf(m_run[i], warp_max(s));
      pr[i] = valid ? expf(s - m_new) : 0.0f;
      const float corr = expf(m_run[i] - m_new);
      l_run[i] = l_run[i] * corr + warp_sum(pr[i]);
#pragma unroll
      for (int e = 0; e < E; ++e) acc[i][e] *= corr;
      m_run[i] = m_new;
    }
    // Output: lane = head dimension; P broadcast from the lane that owns each key.
    for (int j = 0; j < kTileK; ++j) {
      float vv[E];
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int d = lane + 32 * e;
        vv[e] = d < D ? vs[j * D + d] : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float pj = __shfl_sync(0xffffffffu, pr[i], j);
#pragma unroll
        for (int e = 0; e < E; ++e) acc[i][e] += pj * vv[e];
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t m = m0 + warp * kRowsPerWarp + i;
    if (m >= p.M) continue;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int d = lane + 32 * e;
      if (d < D) out[m * q_stride + static_cast<int64_t>(h) * D + d] = acc[i][e] / l_run[i];
    }
  }
}

// Calls f.template operator()<T, E>() for the cache type and the per-lane head-dimension count.
template <class F>
void dispatch_kv(DType t, int head_dim, F&& f) {
  auto by_e = [&]<DType T>() {
    if (head_dim <= 32)
      f.template operator()<T, 1>();
    else if (head_dim <= 64)
      f.template operator()<T, 2>();
    else if (head_dim <= 128)
      f.template operator()<T, 4>();
    else
      f.template operator()<T, 8>();
  };
  switch (t) {
    case DType::F32:
      by_e.template operator()<DType::F32>();
      break;
    case DType::F16:
      by_e.template operator()<DType::F16>();
      break;
    case DType::BF16:
      by_e.template operator()<DType::BF16>();
      break;
    default:
      by_e.template operator()<DType::Q8_0>();
      break;
  }
}

AttnParams make_params(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
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
                    a.window};
}

}  // namespace

size_t attention_decode_scratch_bytes(int64_t n_head, int splits, int64_t head_dim) {
  return kDoneBytes + sizeof(float) * static_cast<size_t>(n_head * splits * (head_dim + 2));
}

void launch_attention_decode(const float* q, const KvView& kv, const KvView* each, int64_t M,
                             const int32_t* pos, const AttentionArgs& a, int splits, void* scratch,
                             float* out, cudaStream_t stream) {
  const AttnParams p = make_params(q, kv, 1, pos, a);
  const dim3 grid(static_cast<unsigned>(a.n_head), static_cast<unsigned>(splits),
                  static_cast<unsigned>(M));
  if (splits > kMaxDecodeSplits || a.n_head * M > kMaxDecodeHeads)
    fail(ErrorKind::Unsupported, "attention (decode): " + std::to_string(splits) + " splits of " +
                                     std::to_string(a.n_head * M) + " heads exceed the kernel's " +
                                     std::to_string(kMaxDecodeSplits) + " of " +
                                     std::to_string(kMaxDecodeHeads));
  auto* done = static_cast<int*>(scratch);
  auto* partials = reinterpret_cast<float*>(static_cast<char*>(scratch) + kDoneBytes);
  dispatch_kv(kv.dtype, p.head_dim, [&]<DType T, int E>() {
    launch("attention (decode)", attn_decode_kernel<T, E>, grid, kDecodeWarps * 32, 0, stream, p,
           each, splits, done, partials, out);
  });
}

void launch_attention_prefill(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                              const AttentionArgs& a, float* out, cudaStream_t stream) {
  if (launch_attention_prefill_mma(q, kv, M, pos, a, out, stream)) return;
  const AttnParams p = make_params(q, kv, M, pos, a);
  const dim3 grid(static_cast<unsigned>((M + kTileQ - 1) / kTileQ),
                  static_cast<unsigned>(a.n_head));
  const size_t smem = prefill_smem_bytes(p.head_dim);
  dispatch_kv(kv.dtype, p.head_dim, [&]<DType T, int E>() {
    check(cudaFuncSetAttribute(attn_prefill_kernel<T, E>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "attention (prefill) shared memory");
    launch("attn prefill", attn_prefill_kernel<T, E>, grid, kPrefillThreads, smem, stream, p, out);
  });
}

}  // namespace ts::cuda
