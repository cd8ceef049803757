// Grouped matmul on the tensor cores for q8_0 weights (Backend::matmul_grouped of q8_0 experts):
// the tiling of grouped_mma.cu (grouped_tile.cuh) over int8 codes, for weights in 4-row groups
// (WeightLayout::Q8Groups: resident experts) and in the file's layout (streamed experts in their
// slots), with the same arithmetic, so with the same bits. The alternative, each expert
// dequantised to f16 for a cuBLAS GEMM of its own, writes and re-reads 2 bytes per weight and
// launches twice per expert.
//
// A pipeline stage is two q8_0 blocks (64 columns) of each of the tile's 128 feature rows, each
// block a sub-stage of its own: the block's codes and scales, and the same 32 columns of the tile's
// 64 activation rows in f16 (64 bytes a row). The kernel is bound by the weight bytes, so the K
// loop keeps many in flight: a 5-stage cp.async pipeline (four stages in flight while one is
// computed; 85 KiB of dynamic shared memory, two blocks a multiprocessor), one barrier per two
// blocks. The codes become f16 as the B fragments are built (every int8 is exact in f16). A block's
// two m16n8k16 steps sum into an f32 accumulator of their own, which is then added to the running
// sum times its feature row's scale: the scale is applied in f32 to sums of exact products, so the
// only rounding besides the f32 sums is that of the activations to f16. Blocks are summed one at a
// time in ascending order, whichever stage holds them.
//
// Fragments: an mma's sum over its 16 columns does not depend on their order, so inside a block
// the columns are permuted, the same way for activations and codes: lane (g, q) = (lane / 4,
// lane % 4) takes columns 8q .. 8q + 3 as k-step 0's fragment columns {2q, 2q + 1, 2q + 8,
// 2q + 9} and 8q + 4 .. 8q + 7 as k-step 1's. One 16-byte load of an activation row and one 8-byte
// load of a codes row (4-row groups) then hold both steps' fragments. Rows are unpadded: a
// quarter-warp's 16-byte loads (two 64-byte activation rows) and a half-warp's 8-byte loads (four
// 32-byte code rows) each cover 128 consecutive bytes, all 32 banks once.
//
// Determinism as in grouped_mma.cu: a tile starts at its group's first row (or 64 rows further),
// every output is the same sequence of steps over K in ascending order, and an mma's output row
// depends only on its own activation row.
#include <cuda_fp16.h>

#include <cstddef>

#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/grouped_tile.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8_groups.cuh"
#include "quant/blocks.h"

namespace ts::cuda {
namespace {

constexpr int kBK = 32;     // K columns per sub-stage: one q8_0 block
constexpr int kSub = 2;     // sub-stages (blocks) per pipeline stage
constexpr int kStages = 5;  // 5 x 17 KiB of shared memory: four stages in flight, one computed
// The file's 34-byte blocks are 2-byte aligned only: a sub-stage copies the 4-byte words that cover
// its block of a row, 36 bytes from 4-byte alignment down (the block starts at byte 0 of them for
// an even block, at byte 2 for an odd one: rows are 4-byte aligned, blocks 2p start 68p in).
constexpr int kBlockWords = 9;

// The q8_0 half of a sub-stage, per weight layout, and the copies that fill it:
// lane_codes(n, q, kt) gives lane q's codes of feature row n (columns 8q .. 8q + 7 of block kt) as
// two words, scales2(n, kt) that block's scales of feature rows n and n + 1 (n even). Rows past N
// are copied as zeros (their sources are not read).
template <WeightLayout L>
struct WeightStage;

template <>
struct WeightStage<WeightLayout::Q8Groups> {
  int8_t codes[kBN][kBK];  // the sub-stage's block of codes of each feature row
  // cp.async moves 4 bytes at least and a scale takes 2: each feature row copies the 4-byte pair
  // of scales (blocks 2p and 2p + 1, 4-byte aligned in the layout) that holds the sub-stage's.
  uint32_t scales[kBN];

  __device__ uint2 lane_codes(int n, int q, int64_t) const {
    return *reinterpret_cast<const uint2*>(&codes[n][8 * q]);
  }
  __device__ float2 scales2(int n, int64_t kt) const {
    const uint2 pairs = *reinterpret_cast<const uint2*>(&scales[n]);
    const int shift = 16 * static_cast<int>(kt % 2);
    return {__half2float(__ushort_as_half(static_cast<uint16_t>(pairs.x >> shift))),
            __half2float(__ushort_as_half(static_cast<uint16_t>(pairs.y >> shift)))};
  }

  // Thread tid's copies, the same in every stage but for the K offset: 16 bytes of the codes of
  // feature row tid / 2, and the scale pair of feature row tid (first kBN threads).
  struct Copies {
    const void* w;
    const int8_t* codes;
    const __half* scales;
    bool codes_full, scales_full;
    int tid;

    __device__ Copies(const uint8_t* w0, size_t row_stride, int64_t K, int64_t n0, int64_t N,
                      int tid_)
        : w(w0), tid(tid_) {
      codes_full = n0 + tid / 2 < N;
      codes = codes_full ? q8_codes(w0, row_stride, K, n0 + tid / 2) + (tid % 2) * 16 : nullptr;
      scales_full = tid < kBN && n0 + tid < N;
      scales = scales_full ? q8_scales(w0, row_stride, K, n0 + tid) : nullptr;
    }
    __device__ void issue(WeightStage& st, int64_t kt) const {
      cp_async16_ahead(smem_addr(&st.codes[tid / 2][(tid % 2) * 16]),
                       codes_full ? codes + kt * kBK : w, codes_full);
      if (tid < kBN)
        cp_async4(smem_addr(&st.scales[tid]), scales_full ? scales + (kt & ~int64_t{1}) : w,
                  scales_full);
    }
  };
};

template <>
struct WeightStage<WeightLayout::Rows> {
  uint32_t words[kBN][kBlockWords];  // block kt of each feature row, from byte 2 (kt % 2) on

  __device__ uint2 lane_codes(int n, int q, int64_t kt) const {
    // The codes start 2 bytes into the block: at byte 2 of word 2q (even block, shifted down 16
    // bits across three words) or at word 2q + 1 (odd block, aligned).
    const int odd = static_cast<int>(kt % 2);
    const uint32_t* lw = &words[n][2 * q + odd];
    const int shift = 16 * (1 - odd);
    return {__funnelshift_r(lw[0], lw[1], shift), __funnelshift_r(lw[1], lw[2 - odd], shift)};
  }
  __device__ float2 scales2(int n, int64_t kt) const {
    return {
        __half2float(__ushort_as_half(reinterpret_cast<const uint16_t*>(words[n])[kt % 2])),
        __half2float(__ushort_as_half(reinterpret_cast<const uint16_t*>(words[n + 1])[kt % 2]))};
  }

  // The sub-stage's kBN x kBlockWords words, thread tid taking every kThreads-th.
  struct Copies {
    const uint8_t* w;  // feature row n0
    size_t row_stride;
    int64_t rows;  // feature rows left from n0
    int tid;

    __device__ Copies(const uint8_t* w0, size_t row_stride_, int64_t, int64_t n0, int64_t N,
                      int tid_)
        : w(w0 + n0 * row_stride_), row_stride(row_stride_), rows(N - n0), tid(tid_) {}
    __device__ void issue(WeightStage& st, int64_t kt) const {
      const size_t k_off = static_cast<size_t>(kt) * sizeof(BlockQ8_0) & ~size_t{3};
#pragma unroll
      for (int c = tid; c < kBN * kBlockWords; c += kThreads) {
        const int r = c / kBlockWords, j = c % kBlockWords;
        const bool full = r < rows;
        cp_async4(smem_addr(&st.words[r][j]), full ? w + r * row_stride + k_off + 4 * j : w, full);
      }
    }
  };
};

// One block's sub-stage in shared memory; a pipeline stage is kSub of them.
template <WeightLayout L>
struct SubStage {
  WeightStage<L> w;
  uint16_t x[kBM][kBK];  // f16 activations
};

template <WeightLayout L>
struct Stage {
  SubStage<L> sub[kSub];
};

template <WeightLayout L>
constexpr size_t kSmemBytes = kStages * sizeof(Stage<L>);

static_assert(kBN * kBK / 16 == kThreads && kBM * kBK * 2 / 16 == kThreads && kBN <= kThreads,
              "per sub-stage each thread copies one chunk of codes and one of activations, and the "
              "first kBN threads a pair of scales (4-row groups)");
static_assert(kSmemBytes<WeightLayout::Q8Groups> <= 99 * 1024 &&
                  kSmemBytes<WeightLayout::Rows> <= 99 * 1024,
              "dynamic shared memory of a block on sm_89");
static_assert(offsetof(BlockQ8_0, qs) == 2 && kBlockWords * 4 == sizeof(BlockQ8_0) + 2,
              "a block: its f16 scale, then its codes");

// (lo, hi) as an f16 pair minus 1152 in both halves.
__device__ __forceinline__ uint32_t minus_1152(uint32_t bits) {
  const __half2 h = __hsub2(*reinterpret_cast<const __half2*>(&bits), __float2half2_rn(1152.0f));
  return *reinterpret_cast<const uint32_t*>(&h);
}

// The four int8 codes of `word` as two f16 pairs (bytes 0, 1 and bytes 2, 3), exactly: with the
// byte c + 128 under 0x64, the f16 bits 0x64XX are 1024 + c + 128, and 1152 comes off.
__device__ __forceinline__ void codes_f16(uint32_t word, uint32_t& lo, uint32_t& hi) {
  const uint32_t biased = word ^ 0x80808080u;
  lo = minus_1152(__byte_perm(biased, 0x64646464u, 0x4140));
  hi = minus_1152(__byte_perm(biased, 0x64646464u, 0x4342));
}

// Two blocks per multiprocessor (registers capped at 128 a thread), so that one block's copies and
// conversions overlap the other's multiplies.
template <WeightLayout L>
__global__ void __launch_bounds__(kThreads, 2)
    grouped_mma_q8_kernel(const GroupTile* tiles, int64_t N, int64_t K, size_t row_stride,
                          const uint16_t* x, int64_t x_row0, float* y) {
  pdl_enter();
  extern __shared__ uint4 smem[];
  Stage<L>* stages = reinterpret_cast<Stage<L>*>(smem);
  const GroupTile tile = tiles[blockIdx.x];
  const int rows = static_cast<int>(tile.rows);
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const uint16_t* xt = x + (tile.row - x_row0) * K;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 4, wn = warp % 4;
  const int g = lane / 4, q = lane % 4;

  // Per block: the weight copies, and 16 bytes of activation row xr (zeros past the tile's rows).
  // Stage s takes blocks kSub kt .. kSub kt + kSub - 1; those past the row's last are neither
  // copied nor computed.
  const typename WeightStage<L>::Copies wcopies(static_cast<const uint8_t*>(tile.w), row_stride, K,
                                                n0, N, tid);
  const int xr = tid / 4, xc = (tid % 4) * 8;
  const bool x_full = xr < rows;
  const int64_t nb = K / kBK;
  const auto load = [&](int s, int64_t kt) {
#pragma unroll
    for (int b = 0; b < kSub; ++b) {
      const int64_t blk = kt * kSub + b;
      if (blk >= nb) break;
      SubStage<L>& sub = stages[s].sub[b];
      wcopies.issue(sub.w, blk);
      cp_async16(smem_addr(&sub.x[xr][xc]), x_full ? xt + xr * K + blk * kBK + xc : xt, x_full);
    }
  };

  float acc[2][4][4] = {};
  // Warps whose rows all lie past the tile's rows skip the multiplies (a small group's tile).
  const bool warp_rows = wm * kWarpRows < rows;
  const bool second_m = wm * kWarpRows + 16 < rows;
  // Block kt of sub-stage st into acc.
  const auto block = [&](const SubStage<L>& st, int64_t kt) {
    // Rows g and g + 8 of each m16 tile: words 0, 1 are k-step 0's fragment columns {2q, 2q + 1}
    // and {2q + 8, 2q + 9}, words 2, 3 k-step 1's.
    uint4 xa[2][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        xa[mi][h] =
            *reinterpret_cast<const uint4*>(&st.x[wm * kWarpRows + mi * 16 + h * 8 + g][8 * q]);
    float part[2][4][4] = {};
#pragma unroll
    for (int nj = 0; nj < 4; ++nj) {
      // Feature row g of the n8 tile: word 0 holds k-step 0's codes, word 1 k-step 1's.
      const uint2 c = st.w.lane_codes(wn * kWarpCols + nj * 8 + g, q, kt);
      uint32_t b[2][2];
      codes_f16(c.x, b[0][0], b[0][1]);
      codes_f16(c.y, b[1][0], b[1][1]);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        if (mi == 1 && !second_m) break;
        const uint32_t a0[4] = {xa[mi][0].x, xa[mi][1].x, xa[mi][0].y, xa[mi][1].y};
        const uint32_t a1[4] = {xa[mi][0].z, xa[mi][1].z, xa[mi][0].w, xa[mi][1].w};
        mma<DType::F16>(part[mi][nj], a0, b[0][0], b[0][1]);
        mma<DType::F16>(part[mi][nj], a1, b[1][0], b[1][1]);
      }
    }
    // Times the scales of this lane's output features, 2q and 2q + 1 of each n8 tile.
#pragma unroll
    for (int nj = 0; nj < 4; ++nj) {
      const float2 d2 = st.w.scales2(wn * kWarpCols + nj * 8 + 2 * q, kt);
      const float d[2] = {d2.x, d2.y};
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[mi][nj][e] = fmaf(part[mi][nj][e], d[e % 2], acc[mi][nj][e]);
    }
  };
  k_pipeline<kStages>((nb + kSub - 1) / kSub, load, [&](int s, int64_t kt) {
    if (!warp_rows) return;
#pragma unroll
    for (int b = 0; b < kSub; ++b) {
      const int64_t blk = kt * kSub + b;
      if (blk >= nb) break;
      block(stages[s].sub[b], blk);
    }
  });
  if (warp_rows) store_tile(acc, tile, n0, N, wm, wn, lane, y);
}

template <WeightLayout L>
void launch_layout(const Weight& shape, const GroupTile* tiles, int64_t n_tiles, const void* x16,
                   int64_t x_row0, float* y, cudaStream_t stream) {
  launch_grouped<grouped_mma_q8_kernel<L>>("grouped q8_0 matmul", kSmemBytes<L>, shape, tiles,
                                           n_tiles, x16, x_row0, y, stream);
}

}  // namespace

// 4-row groups keep columns in 64s: every group is whole 16-byte vectors, a row's codes start
// 16-byte aligned in it and its scales 4-byte aligned (cols / 16 bytes apart), which the 16-byte
// and 4-byte copies need. The file's layout needs 4-byte aligned rows for the 4-byte copies.
bool grouped_mma_q8_supported(const Weight& shape, const void* const* weights, int64_t G) {
  if (shape.dtype != DType::Q8_0) return false;
  uintptr_t align = 0;
  if (shape.layout == WeightLayout::Q8Groups) {
    if (shape.cols % 64 != 0 || kQ8GroupRows * shape.row_stride % 16 != 0) return false;
    align = 16;
  } else if (shape.layout == WeightLayout::Rows) {
    if (shape.row_stride % 4 != 0) return false;
    align = 4;
  } else {
    return false;
  }
  return weights_aligned(weights, G, align);
}

void launch_matmul_grouped_q8(const Weight& shape, const GroupTile* tiles, int64_t n_tiles,
                              const void* x16, int64_t x_row0, float* y, cudaStream_t stream) {
  if (shape.layout == WeightLayout::Q8Groups)
    launch_layout<WeightLayout::Q8Groups>(shape, tiles, n_tiles, x16, x_row0, y, stream);
  else
    launch_layout<WeightLayout::Rows>(shape, tiles, n_tiles, x16, x_row0, y, stream);
}

}  // namespace ts::cuda
