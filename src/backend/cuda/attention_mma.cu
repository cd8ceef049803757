// Prefill attention on the tensor cores for f16 and bf16 KV caches (flash attention).
//
// A block takes 64 query rows of one kv head: `positions` query positions times hb heads of that
// head's group (row r = position r / hb, head r % hb), so every K/V tile it stages in shared
// memory serves all hb heads. Each of its 4 warps owns 16 rows. Per tile of keys:
//   S = Q K^T by mma.sync m16n8k16 (Q rounded to the cache type once, f32 accumulation);
//   scale, softcap, causal / sliding-window mask, online softmax per row in registers (each
//   thread keeps the max and the partial sum of two rows; the four threads of a row agree on the
//   max through shuffles and add their sums at the end);
//   O += P V with P rounded to the cache type, taken straight from the S accumulators (the C
//   fragments of two 8-key blocks are the A fragment of one 16-key step).
// K/V tiles are double-buffered with cp.async (tile t + 1 is in flight while tile t is computed)
// and read with ldmatrix (V transposed by .trans); shared-memory rows are padded by 16 bytes so the
// 8 rows of one ldmatrix fall on distinct banks. Nothing in the workspace grows with the context.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "backend/cuda/attention_mma.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"

namespace ts::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = kWarps * 16;     // (position, head) rows per block
constexpr int kMaxHeadsPerBlock = 16;  // so that a block still spans at least 4 positions
constexpr float kLog2e = 1.4426950408889634f;

// Keys per tile: 256-wide heads take 32, so that O (128 registers per thread) and S fit together.
template <int D>
constexpr int kKeysPerTile = D == 256 ? 32 : 64;

// Up to 128-wide heads the Q fragments stay in registers for the whole key loop; 256-wide ones
// would take 64 more registers and are re-read from shared memory instead.
template <int D>
constexpr bool kQInRegisters = D <= 128;

// 16-bit elements per shared-memory row.
template <int D>
constexpr int kPadded = D + 8;

// Q [kRows][D], then K [2][keys][D] and V [2][keys][D] (two stages), rows padded.
template <int D>
constexpr size_t smem_bytes() {
  return sizeof(uint16_t) * kPadded<D> * (kRows + 4 * kKeysPerTile<D>);
}

struct MmaParams {
  const float* q;
  const uint8_t* k;
  const uint8_t* v;
  size_t row_bytes;
  const int32_t* pos;
  int M;
  int n_head;
  int group;            // query heads per kv head
  int heads_per_block;  // hb, a divisor of group
  int positions;        // query positions per block: kRows / hb
  float scale;
  float softcap;
  int64_t window;
  const float* sinks;      // [n_head] or null
  const int32_t* key_end;  // [M] or null (AttentionArgs::key_end)
};

template <DType T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (T == DType::F16) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

template <DType T, int D>
__global__ void __launch_bounds__(kThreads) attn_prefill_mma_kernel(MmaParams p, float* out) {
  constexpr int BK = kKeysPerTile<D>;
  constexpr int LD = kPadded<D>;
  constexpr int NB = BK / 8;  // 8-key column blocks of S
  constexpr int DB = D / 8;   // 8-wide column blocks of O
  constexpr int KS = D / 16;  // 16-wide steps of Q K^T
  extern __shared__ __align__(16) uint16_t smem[];
  pdl_enter();
  uint16_t* qs = smem;
  uint16_t* ks = qs + kRows * LD;
  uint16_t* vs = ks + 2 * BK * LD;
  __shared__ int block_lo, block_hi;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t4 = lane % 4;  // the mma fragments' row group and column pair
  const int m0 = (gridDim.x - 1 - blockIdx.x) * p.positions;  // latest positions (most keys) first
  const int sub = p.group / p.heads_per_block;
  const int kv_head = blockIdx.y / sub;
  const int h0 = kv_head * p.group + (blockIdx.y % sub) * p.heads_per_block;
  const int64_t q_stride = static_cast<int64_t>(p.n_head) * D;
  const size_t kv_off = static_cast<size_t>(kv_head) * D * sizeof(uint16_t);

  // Query position of block row r, or -1 for a row past M or past the block's positions.
  auto row_m = [&](int r) {
    const int pl = r / p.heads_per_block;
    return pl < p.positions && m0 + pl < p.M ? m0 + pl : -1;
  };
  // Keys [lo, hi) that row r sees (as key_range, attention_common.cuh); empty (INT_MAX, 0) for a
  // row without a query.
  auto row_keys = [&](int r, int& lo, int& hi) {
    const int m = row_m(r);
    lo = INT_MAX, hi = 0;
    if (m < 0) return;
    const int own = p.pos[m] + 1;
    hi = p.key_end != nullptr ? max(own, p.key_end[m]) : own;
    lo = p.window > 0 && p.window < own ? own - static_cast<int>(p.window) : 0;
  };

  if (threadIdx.x == 0) block_lo = INT_MAX, block_hi = 0;
  __syncthreads();
  if (threadIdx.x < kRows) {
    int lo, hi;
    row_keys(threadIdx.x, lo, hi);
    atomicMin(&block_lo, lo);
    atomicMax(&block_hi, hi);
  }
  for (int i = threadIdx.x; i < kRows * D / 2; i += kThreads) {
    const int r = i / (D / 2), d = 2 * (i % (D / 2));
    const int m = row_m(r);
    float2 x = make_float2(0.0f, 0.0f);
    if (m >= 0)
      x = *reinterpret_cast<const float2*>(
          p.q + m * q_stride + static_cast<int64_t>(h0 + r % p.heads_per_block) * D + d);
    *reinterpret_cast<uint32_t*>(qs + r * LD + d) = pack2<T>(x.x, x.y);
  }
  __syncthreads();
  const int k_begin = block_lo, k_end = block_hi;

  // This thread's two rows (g and g + 8 of its warp's 16) and the warp's union of key ranges.
  int lo[2], hi[2];
  row_keys(warp * 16 + g, lo[0], hi[0]);
  row_keys(warp * 16 + g + 8, lo[1], hi[1]);
  const int warp_lo = __reduce_min_sync(0xffffffffu, min(lo[0], lo[1]));
  const int warp_hi = __reduce_max_sync(0xffffffffu, max(hi[0], hi[1]));

  // Per-lane ldmatrix offsets (elements): Q as A (matrices: rows 0-7 / 8-15 x columns 0-7 /
  // 8-15), K as B of two 8-key blocks (keys 0-7, 8-15 x columns 0-7, 8-15), V as B of two
  // 8-column blocks (keys 0-7, 8-15 x columns 0-7, 8-15, transposed).
  const int q_lane = (warp * 16 + lane % 8 + (lane / 8) % 2 * 8) * LD + lane / 16 * 8;
  const int k_lane = (lane % 8 + lane / 16 * 8) * LD + (lane / 8) % 2 * 8;
  const int v_lane = (lane % 8 + (lane / 8) % 2 * 8) * LD + lane / 16 * 8;

  uint32_t qf[kQInRegisters<D> ? KS : 1][4];
  if constexpr (kQInRegisters<D>) {
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) ldmatrix_x4(qf[kk], smem_addr(qs + q_lane + kk * 16));
  }

  auto load_tile = [&](int t) {
    const int k0 = k_begin + t * BK;
    uint16_t* kd = ks + (t % 2) * BK * LD;
    uint16_t* vd = vs + (t % 2) * BK * LD;
    for (int i = threadIdx.x; i < BK * (D / 8); i += kThreads) {
      const int j = i / (D / 8), c = i % (D / 8) * 8;
      const bool in = k0 + j < k_end;  // rows past the range become zeros: P V stays finite
      const size_t off = in ? static_cast<size_t>(k0 + j) * p.row_bytes + kv_off + c * 2 : 0;
      cp_async16(smem_addr(kd + j * LD + c), p.k + off, in);
      cp_async16(smem_addr(vd + j * LD + c), p.v + off, in);
    }
    cp_async_commit();
  };

  float o[DB][4];
#pragma unroll
  for (int db = 0; db < DB; ++db) o[db][0] = o[db][1] = o[db][2] = o[db][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  const int n_tiles = (k_end - k_begin + BK - 1) / BK;
  load_tile(0);
  for (int t = 0; t < n_tiles; ++t) {
    if (t + 1 < n_tiles) {
      load_tile(t + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int k0 = k_begin + t * BK;
    if (k0 < warp_hi && k0 + BK > warp_lo) {
      const uint16_t* kt = ks + (t % 2) * BK * LD;
      const uint16_t* vt = vs + (t % 2) * BK * LD;
      float s[NB][4];
#pragma unroll
      for (int nb = 0; nb < NB; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        uint32_t a[4];
        if constexpr (kQInRegisters<D>) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[i] = qf[kk][i];
        } else {
          ldmatrix_x4(a, smem_addr(qs + q_lane + kk * 16));
        }
#pragma unroll
        for (int nb = 0; nb < NB; nb += 2) {
          uint32_t b[4];
          ldmatrix_x4(b, smem_addr(kt + k_lane + nb * 8 * LD + kk * 16));
          mma<T>(s[nb], a, b[0], b[1]);
          mma<T>(s[nb + 1], a, b[2], b[3]);
        }
      }

      // Scores (element c of block nb: row g + 8 * (c / 2), key k0 + 8 nb + 2 t4 + c % 2).
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int key = k0 + nb * 8 + 2 * t4 + c % 2, hr = c / 2;
          float x = s[nb][c] * p.scale;
          if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
          x = key >= lo[hr] && key < hi[hr] ? x : -INFINITY;
          s[nb][c] = x;
          mx[hr] = fmaxf(mx[hr], x);
        }
      float base[2], corr[2];
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
        mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
        const float m_new = fmaxf(row_max[hr], mx[hr]);
        base[hr] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet: every p is 0
        corr[hr] = exp2f((row_max[hr] - base[hr]) * kLog2e);
        row_max[hr] = m_new;
        row_sum[hr] *= corr[hr];
      }
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          s[nb][c] = exp2f((s[nb][c] - base[c / 2]) * kLog2e);
          row_sum[c / 2] += s[nb][c];  // f32, before P is rounded to the cache type
        }
#pragma unroll
      for (int db = 0; db < DB; ++db) {
        o[db][0] *= corr[0], o[db][1] *= corr[0];
        o[db][2] *= corr[1], o[db][3] *= corr[1];
      }

#pragma unroll
      for (int kp = 0; kp < BK / 16; ++kp) {
        const uint32_t a[4] = {pack2<T>(s[2 * kp][0], s[2 * kp][1]),
                               pack2<T>(s[2 * kp][2], s[2 * kp][3]),
                               pack2<T>(s[2 * kp + 1][0], s[2 * kp + 1][1]),
                               pack2<T>(s[2 * kp + 1][2], s[2 * kp + 1][3])};
#pragma unroll
        for (int db = 0; db < DB; db += 2) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, smem_addr(vt + v_lane + kp * 16 * LD + db * 8));
          mma<T>(o[db], a, b[0], b[1]);
          mma<T>(o[db + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before tile t + 2 overwrites it
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float l = row_sum[hr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = warp * 16 + g + 8 * hr;
    const int m = row_m(r);
    if (m < 0) continue;
    const int head = h0 + r % p.heads_per_block;
    if (p.sinks != nullptr) l += exp2f((p.sinks[head] - row_max[hr]) * kLog2e);  // as with_sink
    const float inv = 1.0f / l;
    float* dst = out + m * q_stride + static_cast<int64_t>(head) * D + 2 * t4;
#pragma unroll
    for (int db = 0; db < DB; ++db)
      *reinterpret_cast<float2*>(dst + db * 8) =
          make_float2(o[db][2 * hr] * inv, o[db][2 * hr + 1] * inv);
  }
}

template <DType T, int D>
void launch_mma(const MmaParams& p, dim3 grid, float* out, cudaStream_t stream) {
  constexpr size_t smem = smem_bytes<D>();
  check(cudaFuncSetAttribute(attn_prefill_mma_kernel<T, D>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "attention (prefill, tensor cores) shared memory");
  launch("attention (prefill, tensor cores)", attn_prefill_mma_kernel<T, D>, grid, kThreads, smem,
         stream, p, out);
}

template <DType T>
void launch_for_head_dim(int D, const MmaParams& p, dim3 grid, float* out, cudaStream_t stream) {
  if (D == 64)
    launch_mma<T, 64>(p, grid, out, stream);
  else if (D == 128)
    launch_mma<T, 128>(p, grid, out, stream);
  else
    launch_mma<T, 256>(p, grid, out, stream);
}

bool aligned(const void* p, uintptr_t n) {
  return reinterpret_cast<uintptr_t>(p) % n == 0;
}

}  // namespace

bool launch_attention_prefill_mma(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                                  const AttentionArgs& a, float* out, cudaStream_t stream) {
  if (kv.dtype != DType::F16 && kv.dtype != DType::BF16) return false;
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256) return false;
  // 16-byte cp.async of cache rows, 8-byte loads of Q pairs and stores of output pairs.
  if (!aligned(kv.k, 16) || !aligned(kv.v, 16) || kv.row_bytes % 16 != 0 || !aligned(q, 8) ||
      !aligned(out, 8))
    return false;
  const int group = static_cast<int>(a.n_head / a.n_head_kv);
  int hb = std::min(group, kMaxHeadsPerBlock);
  while (group % hb != 0) --hb;
  const MmaParams p{q,
                    static_cast<const uint8_t*>(kv.k),
                    static_cast<const uint8_t*>(kv.v),
                    kv.row_bytes,
                    pos,
                    static_cast<int>(M),
                    static_cast<int>(a.n_head),
                    group,
                    hb,
                    kRows / hb,
                    a.scale,
                    a.softcap,
                    a.window,
                    a.sinks,
                    a.key_end};
  const dim3 grid(static_cast<unsigned>((M + p.positions - 1) / p.positions),
                  static_cast<unsigned>(a.n_head_kv * (group / hb)));
  const int D = static_cast<int>(a.head_dim);
  if (kv.dtype == DType::F16)
    launch_for_head_dim<DType::F16>(D, p, grid, out, stream);
  else
    launch_for_head_dim<DType::BF16>(D, p, grid, out, stream);
  return true;
}

}  // namespace ts::cuda
