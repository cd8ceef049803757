// Decode attention: one query row per sequence over its KV cache, f32 arithmetic whatever the
// cache type; split-KV ("flash decoding") with the query heads of a kv head taken together.
//
// Block (h, s, r): key range s of row r for query head h alone (narrow, at short contexts), or for
// the GB query heads h .. h + GB - 1 (GB = decode_heads_per_block, up to 4, all of them sharing one
// kv head; wide, at long contexts, where the blocks of the group's other heads leave at once). Each
// of its kWarps warps walks tiles of kTile keys of the range:
// * scores, a key per lane: the lane loads its key's K slice in chunks of 8 elements (16 bytes of
//   f16) and dots it with the GB query vectors, which sit in shared memory. No cross-lane sum per
//   key, and each K byte is loaded once for the GB heads. (The kernel before gave a warp to each
//   key of each head: ~95 instructions and a five-step warp sum per key and head, bound by its
//   instructions, not the cache's bytes: docs/PERFORMANCE.md, "Measured choices".)
// * the tile's online softmax per head: one warp max per head and tile; the denominator stays a
//   per-lane partial until the end;
// * output, E consecutive head dimensions per lane: the warp reads each V row in one coalesced
//   load and adds it, weighted, to each head's accumulator; the weights come from shared memory.
//   Heads wider than 256 (MLA's 576-wide latent rows, Gemma 4's global heads) take C runs of 256
//   such dimensions (lane l: c * 256 + 8 l ..), and at most the query heads whose accumulators fit
//   the block's shared memory.
// The warps' states merge in shared memory. A range that is the row's only one writes the output;
// otherwise it writes a partial (max, denominator, output) per head, and the last block of the
// group to finish merges the ranges.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <string>

#include "backend/cuda/act_quant.cuh"
#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "core/error.h"

namespace ts::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kTile = 32;  // keys per warp and step: one per lane
// Keys of one key range at least: a step of the block's warps. Shorter ranges add partials to
// write and merge, and the merge is a dependent chain (fence, counter, the partials' loads) at the
// end of the kernel.
constexpr int64_t kRangeKeys = kWarps * kTile;
// The decode scratch starts with a counter per head (blocks done; the group's first head's is
// used), zero between launches, then the partials; room for kMaxDecodeHeads heads.
constexpr size_t kDoneBytes = kMaxDecodeHeads * sizeof(int);
// 32-bit registers a lane gives to cache loads in flight before their first use.
constexpr int kLoadWords = 64;

__host__ __device__ constexpr int min_of(int a, int b) {
  return a < b ? a : b;
}

// N consecutive elements (N = 1, 2, 4 or 8; at an element index that is a multiple of N) of one
// cache row's head slice, loaded raw in as few aligned loads as the bytes allow, read as f32.
template <DType T, int N>
struct CacheRun {
  static constexpr int kBytes = N * static_cast<int>(T == DType::F32 ? 4 : 2);
  static constexpr int kWords = kBytes < 4 ? 1 : kBytes / 4;
  uint32_t w[kWords] = {};

  __device__ __forceinline__ void load(const uint8_t* head, int d) {
    const uint8_t* p = head + static_cast<size_t>(d) * (kBytes / N);
    if constexpr (kBytes == 2) {
      w[0] = load_u16(p);
    } else if constexpr (kBytes == 4) {
      w[0] = *reinterpret_cast<const uint32_t*>(p);
    } else if constexpr (kBytes == 8) {
      const uint2 x = *reinterpret_cast<const uint2*>(p);
      w[0] = x.x, w[1] = x.y;
    } else {
#pragma unroll
      for (int i = 0; i < kBytes / 16; ++i) {
        const uint4 x = reinterpret_cast<const uint4*>(p)[i];
        w[4 * i] = x.x, w[4 * i + 1] = x.y, w[4 * i + 2] = x.z, w[4 * i + 3] = x.w;
      }
    }
  }

  __device__ __forceinline__ float get(int i) const {
    if constexpr (T == DType::F32) {
      return __uint_as_float(w[i]);
    } else {
      const auto bits = static_cast<uint16_t>(w[i / 2] >> (16 * (i % 2)));
      if constexpr (T == DType::F16)
        return half_bits_to_float(bits);
      else
        return bf16_bits_to_float(bits);
    }
  }
};

// q8_0: the N quants and their block's scale (N <= 32, so the run lies in one block).
template <int N>
struct CacheRun<DType::Q8_0, N> {
  static constexpr int kWords = (N + 3) / 4 + 1;
  uint32_t q[(N + 3) / 4] = {};
  uint16_t scale = 0;

  __device__ __forceinline__ void load(const uint8_t* head, int d) {
    const uint8_t* blk = head + static_cast<size_t>(d / kQK32) * sizeof(BlockQ8_0);
    const uint8_t* qs = blk + offsetof(BlockQ8_0, qs) + d % kQK32;
    scale = load_u16(blk + offsetof(BlockQ8_0, d));
    // Blocks are 34 bytes: the quants are only 2-byte aligned.
    if constexpr (N == 1) {
      q[0] = *qs;
    } else {
#pragma unroll
      for (int i = 0; i < N / 2; ++i)
        q[i / 2] |= static_cast<uint32_t>(load_u16(qs + 2 * i)) << (16 * (i % 2));
    }
  }

  __device__ __forceinline__ float get(int i) const {
    const auto x = static_cast<int8_t>(q[i / 4] >> (8 * (i % 4)));
    return static_cast<float>(x) * half_bits_to_float(scale);
  }
};

// Head dimensions a warp's lanes cover for heads of D: 32 E (dispatch_kv's E) up to 256, else
// runs of 256 (E = 8, C runs).
constexpr int lane_span(int D) {
  return D <= 32 ? 32 : D <= 64 ? 64 : D <= 128 ? 128 : (D + 255) / 256 * 256;
}

// The static shared memory of a block of GB query heads whose lanes cover W dimensions:
// DecodeShared and combine_splits' weights.
constexpr size_t decode_shared_bytes(int GB, int W) {
  return sizeof(float) * GB * (W + kWarps * kTile + 2 * kWarps + kWarps * W + kMaxDecodeSplits + 1);
}
constexpr size_t kStaticSharedBytes = 48 * 1024;

// Byte offset of kv head `kv_head`'s slice in a cache row.
template <DType T>
__device__ __forceinline__ size_t head_offset(int kv_head, int D) {
  if constexpr (T == DType::Q8_0)
    return static_cast<size_t>(kv_head) * (D / kQK32) * sizeof(BlockQ8_0);
  else
    return static_cast<size_t>(kv_head) * D * (T == DType::F32 ? 4 : 2);
}

// Output element e of the launch (head * D + d) is y; with acts.q, also its int8 form for the
// output projection's GEMV (act_quant.cuh). Whole warps call it, e consecutive over their lanes and
// a multiple of 32 at lane 0 (the host quantises only heads of a multiple of 32); `live` false for
// warps past the outputs.
__device__ __forceinline__ void write_output(float* head_out, ActsView acts, int64_t e, float y,
                                             bool live) {
  if (live) head_out[e] = y;
  if (acts.q != nullptr) {
    const float v[1] = {y};
    quantize_block_part<1>(v, live, e, acts);
  }
}

// Merges the first `ranges` of the `splits` partials (max, denominator, output) of heads h0 .. h0 +
// GB - 1 into their output rows, with every thread of the block. Each split's max and denominator
// are read once, in parallel, into shared memory and turned into the split's weight. A thread's
// outputs (GB x 32 E / threads of them) are summed side by side, so that the loads of all of them
// are in flight together: one after the other, each output's ranges cost their own L2 round trips
// at the end of the kernel.
template <int GB, int W>
__device__ void combine_splits(const float* partials, int64_t h0, int splits, int ranges, int D,
                               const float* sinks, int sink_h0, float* head_out, ActsView acts) {
  __shared__ float weight[GB][kMaxDecodeSplits];
  __shared__ float inv_den[GB];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const auto part = [&](int h, int s) { return partials + ((h0 + h) * splits + s) * (D + 2); };
  for (int h = warp; h < GB; h += kWarps) {
    float mx = -FLT_MAX;
    for (int s = lane; s < ranges; s += 32)
      if (__ldcg(part(h, s) + 1) > 0.0f) mx = fmaxf(mx, __ldcg(part(h, s)));
    mx = warp_max(mx);
    float den = 0.0f;
    for (int s = lane; s < ranges; s += 32) {
      const float l = __ldcg(part(h, s) + 1);
      const float w = l > 0.0f ? expf(__ldcg(part(h, s)) - mx) : 0.0f;
      weight[h][s] = w;
      den += l * w;
    }
    den = warp_sum(den);
    if (lane == 0) inv_den[h] = 1.0f / with_sink(den, mx, sinks, sink_h0 + h);
  }
  __syncthreads();
  constexpr int kOutputs = (GB * W + kWarps * 32 - 1) / (kWarps * 32);
  int h[kOutputs], d[kOutputs];
  float o[kOutputs];
#pragma unroll
  for (int u = 0; u < kOutputs; ++u) {
    const int i = min(static_cast<int>(threadIdx.x) + u * kWarps * 32, GB * D - 1);
    h[u] = i / D, d[u] = i % D, o[u] = 0.0f;
  }
#pragma unroll 4
  for (int s = 0; s < ranges; ++s) {
#pragma unroll
    for (int u = 0; u < kOutputs; ++u) o[u] += __ldcg(part(h[u], s) + 2 + d[u]) * weight[h[u]][s];
  }
#pragma unroll
  for (int u = 0; u < kOutputs; ++u)
    write_output(head_out, acts, (h0 + h[u]) * D + d[u], o[u] * inv_den[h[u]],
                 threadIdx.x + u * kWarps * 32 < GB * D);
}

// A block's shared memory for GB query heads whose lanes cover W head dimensions.
template <int GB, int W>
struct DecodeShared {
  float q[GB][W];
  float w[kWarps][GB][kTile];
  float warp_m[kWarps][GB], warp_l[kWarps][GB];
  float warp_acc[kWarps][GB][W];
};
static_assert(sizeof(DecodeShared<4, 768>) + sizeof(float) * 4 * (kMaxDecodeSplits + 1) ==
              decode_shared_bytes(4, 768));

// Keys j0 .. j1 - 1 (range s of `ranges`) for query heads h0 .. h0 + GB - 1 of the launch's row
// whose first head is row_heads: the output rows, or the range's partials and, in the last of the
// ranges' blocks to finish, their merge.
template <DType T, int E, int C, int GB>
__device__ void attend_range(const AttnParams& p, DecodeShared<GB, 32 * E * C>& sh,
                             int64_t row_heads, int h0, int s, int splits, int ranges, int64_t j0,
                             int64_t j1, int* done, float* partials, float* head_out,
                             ActsView acts) {
  constexpr int kChunks = 4 * E * C;  // 8-element chunks of a K slice
  constexpr int kChunkBatch = min_of(kChunks, kLoadWords / CacheRun<T, 8>::kWords);
  constexpr int kValueBatch = min_of(kTile, kLoadWords / (C * CacheRun<T, E>::kWords));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int D = p.head_dim;
  const size_t head_bytes = head_offset<T>(h0 / p.group, D);
  const uint8_t* k_head = p.k + head_bytes;
  const uint8_t* v_head = p.v + head_bytes;

  const float* q = p.q + (row_heads + h0) * D;
  for (int i = threadIdx.x; i < GB * D; i += blockDim.x) sh.q[i / D][i % D] = q[i];
  __syncthreads();
  float m[GB], l[GB], acc[GB][C][E];
#pragma unroll
  for (int h = 0; h < GB; ++h) {
    m[h] = -FLT_MAX, l[h] = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int e = 0; e < E; ++e) acc[h][c][e] = 0.0f;
  }
  // The lane's first dimension of each run; D % 8 == 0, so a run's E dimensions are all in or out.
  int dim[C];
  bool has_dims[C];
#pragma unroll
  for (int c = 0; c < C; ++c) dim[c] = (c * 32 + lane) * E, has_dims[c] = dim[c] < D;
  for (int64_t t0 = j0 + static_cast<int64_t>(warp) * kTile; t0 < j1;
       t0 += static_cast<int64_t>(kWarps) * kTile) {
    const int n = static_cast<int>(min(static_cast<int64_t>(kTile), j1 - t0));
    const bool has_key = lane < n;
    const uint8_t* k_row = k_head + static_cast<size_t>(t0 + lane) * p.row_bytes;

    float sc[GB] = {};
    for (int c0 = 0; c0 < kChunks; c0 += kChunkBatch) {
      CacheRun<T, 8> kc[kChunkBatch];
#pragma unroll
      for (int c = 0; c < kChunkBatch; ++c)
        if (has_key && (c0 + c) * 8 < D) kc[c].load(k_row, (c0 + c) * 8);
#pragma unroll
      for (int c = 0; c < kChunkBatch; ++c) {
        if ((c0 + c) * 8 >= D) break;
        float kx[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) kx[i] = kc[c].get(i);
#pragma unroll
        for (int h = 0; h < GB; ++h) {
#pragma unroll
          for (int i = 0; i < 8; ++i) sc[h] += sh.q[h][(c0 + c) * 8 + i] * kx[i];
        }
      }
    }

#pragma unroll
    for (int h = 0; h < GB; ++h) {
      const float x = has_key ? cap_score(sc[h] * p.scale, p.softcap) : -FLT_MAX;
      const float m_new = fmaxf(m[h], warp_max(x));
      const float w = has_key ? expf(x - m_new) : 0.0f;
      const float corr = expf(m[h] - m_new);
      l[h] = l[h] * corr + w;
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int e = 0; e < E; ++e) acc[h][c][e] *= corr;
      m[h] = m_new;
      sh.w[warp][h][lane] = w;
    }
    __syncwarp();

    const uint8_t* v_rows = v_head + static_cast<size_t>(t0) * p.row_bytes;
    for (int i0 = 0; i0 < n; i0 += kValueBatch) {
      CacheRun<T, E> vr[kValueBatch][C];
#pragma unroll
      for (int u = 0; u < kValueBatch; ++u)
#pragma unroll
        for (int c = 0; c < C; ++c)
          if (has_dims[c] && i0 + u < n)
            vr[u][c].load(v_rows + static_cast<size_t>(i0 + u) * p.row_bytes, dim[c]);
#pragma unroll
      for (int u = 0; u < kValueBatch; ++u) {
        if (i0 + u >= n) break;
#pragma unroll
        for (int h = 0; h < GB; ++h) {
          const float w = sh.w[warp][h][i0 + u];
#pragma unroll
          for (int c = 0; c < C; ++c)
#pragma unroll
            for (int e = 0; e < E; ++e) acc[h][c][e] += w * vr[u][c].get(e);
        }
      }
    }
    __syncwarp();  // sh.w is rewritten by the next tile
  }

  // Merge the warps (a warp that saw no key has l = 0 and contributes nothing).
#pragma unroll
  for (int h = 0; h < GB; ++h) {
    const float lw = warp_sum(l[h]);
    if (lane == 0) sh.warp_m[warp][h] = m[h], sh.warp_l[warp][h] = lw;
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int e = 0; e < E; ++e) sh.warp_acc[warp][h][dim[c] + e] = acc[h][c][e];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < GB * D; i += blockDim.x) {
    const int h = i / D, d = i % D;
    float mx = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w)
      if (sh.warp_l[w][h] > 0.0f) mx = fmaxf(mx, sh.warp_m[w][h]);
    float o = 0.0f, den = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (sh.warp_l[w][h] > 0.0f) {
        const float f = expf(sh.warp_m[w][h] - mx);
        o += sh.warp_acc[w][h][d] * f;
        den += sh.warp_l[w][h] * f;
      }
    const int64_t head = row_heads + h0 + h;
    if (ranges == 1) {
      write_output(head_out, acts, head * D + d, o / with_sink(den, mx, p.sinks, h0 + h), true);
    } else {
      float* part = partials + (head * splits + s) * (D + 2);
      part[2 + d] = o;
      if (d == 0) part[0] = mx, part[1] = den;
    }
  }
  if (ranges == 1) return;

  // The last of the group's blocks to finish merges the ranges (one kernel fewer per layer). Its
  // counter goes back to 0 for the next launch.
  __shared__ bool last;
  __threadfence();  // this block's partials are visible to whichever block merges
  __syncthreads();
  int* counter = done + row_heads + h0;
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1) == ranges - 1;
    if (last) *counter = 0;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  combine_splits<GB, 32 * E * C>(partials, row_heads + h0, splits, ranges, D, p.sinks, h0, head_out,
                                 acts);
}

// The rows' keys in blocks of one query head (narrow) below narrow_keys keys, else of the GB heads
// of a kv head (wide). A narrow block does 1 / GB of a wide one's serial work: at short contexts,
// where a row has a range or a few, the kernel is the latency of that work; at long ones the wide
// blocks read each K and V byte once for their GB heads (docs/PERFORMANCE.md, "Measured
// choices"). Both give the same bits: a head's keys are walked in the same tiles, warps and order
// either way. The grid has a block per head and range: in wide rows the blocks of a group's other
// heads leave at once.
template <DType T, int E, int C, int GB>
__global__ void __launch_bounds__(kWarps * 32)
    attn_decode_kernel(AttnParams p, const KvView* each, int splits, int64_t narrow_keys, int* done,
                       float* partials, float* head_out, ActsView acts) {
  __shared__ union {
    DecodeShared<GB, 32 * E * C> wide;
    DecodeShared<1, 32 * E * C> narrow;
  } sh;
  // Which blocks work depends on the positions only, which (like `each`) the host's argument copies
  // wrote before any kernel of the step: the others leave before the wait for the kernel ahead, so
  // that they do not hold a multiprocessor's block slots until it ends.
  const int head = blockIdx.x, s = blockIdx.y, r = blockIdx.z;
  int64_t lo, hi;
  key_range(p, r, lo, hi);
  const bool narrow = GB > 1 && hi - lo < narrow_keys;
  if (!narrow && head % GB != 0) return;
  // The ranges this row's keys take: one per kRangeKeys keys, at most `splits` (the grid, fixed so
  // that a recorded step replays at any position).
  const int ranges = static_cast<int>(
      min(static_cast<int64_t>(splits), max(int64_t{1}, (hi - lo + kRangeKeys - 1) / kRangeKeys)));
  if (s >= ranges) return;
  const int64_t per = (hi - lo + ranges - 1) / ranges;
  const int64_t j0 = lo + s * per, j1 = min(hi, j0 + per);
  if (each != nullptr) {
    p.k = static_cast<const uint8_t*>(each[r].k);
    p.v = static_cast<const uint8_t*>(each[r].v);
  }
  // Row r's heads are heads r * n_head .. of the launch: its own counters, partials and output.
  const int64_t row_heads = static_cast<int64_t>(r) * p.n_head;
  pdl_enter();
  if (narrow)
    attend_range<T, E, C, 1>(p, sh.narrow, row_heads, head, s, splits, ranges, j0, j1, done,
                             partials, head_out, acts);
  else
    attend_range<T, E, C, GB>(p, sh.wide, row_heads, head, s, splits, ranges, j0, j1, done,
                              partials, head_out, acts);
}

// Calls f.template operator()<T, E, C, GB>() for the cache type, the lanes' runs of head
// dimensions (E each, C of them) and the query heads per block. A GB whose block would not fit
// its shared memory (decode_heads_per_block never asks for one) takes the next smaller: the same
// bits.
template <class F>
void dispatch_decode(DType t, int head_dim, int heads_per_block, F&& f) {
  const auto heads = [&]<DType T, int E, int C>() {
    constexpr int W = 32 * E * C;
    switch (heads_per_block) {
      case 4:
        if constexpr (decode_shared_bytes(4, W) <= kStaticSharedBytes)
          return f.template operator()<T, E, C, 4>();
        [[fallthrough]];
      case 2:
        if constexpr (decode_shared_bytes(2, W) <= kStaticSharedBytes)
          return f.template operator()<T, E, C, 2>();
        [[fallthrough]];
      default:
        return f.template operator()<T, E, C, 1>();
    }
  };
  if (head_dim <= 256)
    dispatch_kv(t, head_dim, [&]<DType T, int E>() { heads.template operator()<T, E, 1>(); });
  else if (head_dim <= 512)
    dispatch_kv_type(t, [&]<DType T>() { heads.template operator()<T, 8, 2>(); });
  else
    dispatch_kv_type(t, [&]<DType T>() { heads.template operator()<T, 8, 3>(); });
}

}  // namespace

// At most 4: with 8 (Qwen3-30B-A3B's group) a short context ran on 4 blocks in all, one warp doing
// the 8 heads' work in a row, and that model's short-context decode measured slower than the
// kernel before this one; at 4 it is level there, and faster at long contexts (docs/PERFORMANCE.md,
// "Measured choices"). Wide heads take fewer where 4 heads' accumulators do not fit a block.
int decode_heads_per_block(int64_t n_head, int64_t n_head_kv, int64_t head_dim) {
  if (n_head_kv <= 0 || n_head % n_head_kv != 0) return 1;  // refused by the op's own checks
  const int64_t group = n_head / n_head_kv;
  const int w = lane_span(static_cast<int>(std::min<int64_t>(head_dim, kMaxAttentionHeadDim)));
  for (int gb : {4, 2})
    if (group % gb == 0 && decode_shared_bytes(gb, w) <= kStaticSharedBytes) return gb;
  return 1;
}

size_t attention_decode_scratch_bytes(int64_t n_head, int splits, int64_t head_dim) {
  return kDoneBytes + sizeof(float) * static_cast<size_t>(n_head * splits * (head_dim + 2));
}

bool launch_attention_decode(const float* q, const KvView& kv, const KvView* each, int64_t M,
                             const int32_t* pos, const AttentionArgs& a, int splits,
                             int64_t narrow_keys, void* scratch, float* out, cudaStream_t stream,
                             void* acts) {
  const AttnParams p = make_attn_params(q, kv, 1, pos, a);
  const int gb = decode_heads_per_block(a.n_head, a.n_head_kv, a.head_dim);
  if (splits > kMaxDecodeSplits || a.n_head * M > kMaxDecodeHeads)
    fail(ErrorKind::Unsupported, "attention (decode): " + std::to_string(splits) + " splits of " +
                                     std::to_string(a.n_head * M) + " heads exceed the kernel's " +
                                     std::to_string(kMaxDecodeSplits) + " of " +
                                     std::to_string(kMaxDecodeHeads));
  const dim3 grid(static_cast<unsigned>(a.n_head), static_cast<unsigned>(splits),
                  static_cast<unsigned>(M));
  auto* done = static_cast<int*>(scratch);
  auto* partials = reinterpret_cast<float*>(static_cast<char*>(scratch) + kDoneBytes);
  // Quantised output needs a head's outputs in whole 32-element blocks (write_output).
  const ActsView q8 = acts != nullptr && a.head_dim % 32 == 0
                          ? acts_view(acts, M * a.n_head * a.head_dim)
                          : ActsView{};
  dispatch_decode(kv.dtype, p.head_dim, gb, [&]<DType T, int E, int C, int GB>() {
    launch("attention (decode)", attn_decode_kernel<T, E, C, GB>, grid, kWarps * 32, 0, stream, p,
           each, splits, narrow_keys, done, partials, out, q8);
  });
  return q8.q != nullptr;
}

// Each row's keys as one range, every block a row's whole range: no partials, no scratch.
void launch_attention_rows(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                           const AttentionArgs& a, float* out, cudaStream_t stream) {
  const AttnParams p = make_attn_params(q, kv, M, pos, a);
  const int gb = decode_heads_per_block(a.n_head, a.n_head_kv, a.head_dim);
  const dim3 grid(static_cast<unsigned>(a.n_head), 1, static_cast<unsigned>(M));
  dispatch_decode(kv.dtype, p.head_dim, gb, [&]<DType T, int E, int C, int GB>() {
    launch("attention (rows)", attn_decode_kernel<T, E, C, GB>, grid, kWarps * 32, 0, stream, p,
           nullptr, 1, int64_t{0}, nullptr, nullptr, out, ActsView{});
  });
}

}  // namespace ts::cuda
