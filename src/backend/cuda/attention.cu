// Causal attention over the KV cache for many query rows (prefill), f32 arithmetic whatever the
// cache type. Decode (one row per sequence) is attention_decode.cu.
//
// f16 and bf16 caches of the common head sizes go to the tensor-core kernel of attention_mma.cu.
// Heads wider than kMaxTiledHeadDim (MLA's latent rows, Gemma 4's global heads), whose tiles
// would not fit a block's shared memory, take the decode kernel a row at a time
// (launch_attention_rows). Everything else (f32 caches, whose results must stay exact; q8_0;
// other head sizes) takes the f32 kernel here: one block per (32 query rows, head) walks the keys
// in tiles of 32 staged in shared memory as f32: scores with one key per lane, online softmax per
// row, and the output accumulated with one head dimension per lane.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_mma.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"

namespace ts::cuda {
namespace {

constexpr int kTileQ = 32;  // query rows per block: 8 warps x 4 rows
constexpr int kTileK = 32;  // keys per tile: one per lane
constexpr int kRowsPerWarp = 4;
constexpr int kPrefillThreads = 256;
constexpr int64_t kMaxTiledHeadDim = 256;  // 8 head dimensions per lane

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
    if (m0 + lane < p.M) key_range(p, m0 + lane, lo, hi);
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
    if (m < p.M) key_range(p, m, row_lo[i], row_hi[i]);
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
    const float l = with_sink(l_run[i], m_run[i], p.sinks, h);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int d = lane + 32 * e;
      if (d < D) out[m * q_stride + static_cast<int64_t>(h) * D + d] = acc[i][e] / l;
    }
  }
}

}  // namespace

void launch_attention_prefill(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                              const AttentionArgs& a, float* out, cudaStream_t stream) {
  if (launch_attention_prefill_mma(q, kv, M, pos, a, out, stream)) return;
  if (a.head_dim > kMaxTiledHeadDim) return launch_attention_rows(q, kv, M, pos, a, out, stream);
  const AttnParams p = make_attn_params(q, kv, M, pos, a);
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
