// Grouped matmul on the tensor cores (Backend::matmul_grouped for f16 / bf16 weights): every
// routed expert of a micro-batch in one launch instead of a cuBLAS call per expert, which at the
// 20-60 rows an expert gets in prefill runs far below the tensor-core rate.
//
// A block computes one tile of 64 rows of one group times 128 output features (grouped_tile.cuh):
// its 8 warps each own 32 rows x 32 features (2 x 4 mma.sync m16n8k16 tiles, f32 accumulators).
// The kernel is bound by the weight bytes (each expert's weights are read once per 64 of its
// rows), so the K loop is built to keep many of them in flight: 64 columns (128 bytes of every
// weight row: whole L2 lines) a stage, through a 4-stage cp.async pipeline (three stages in flight
// while one is computed; 96 KiB of dynamic shared memory, two blocks a multiprocessor on sm_90),
// one barrier per 16 KiB of weights. Rows are unpadded 128 bytes with their 16-byte chunks
// swizzled (chunk c of row r at c ^ (r % 8)), so the 8 rows of one ldmatrix fall on distinct banks.
// blockIdx.x runs over row tiles so that the tiles of one group and one feature tile run side by
// side and share their weight reads in L2.
//
// Determinism: a tile starts at its group's first row (or 64 rows further), every output is the
// same sequence of mma steps over K in ascending order, and an mma's output row depends only on
// its own A row. A row's result is therefore the same whichever other groups share the call.
//
// q4_k and q5_k weights take the same kernel: a stage copies each feature row's block header and
// the 32 bytes of nibbles that hold its 64 columns (a sub-block pair; q5_k: and the block's fifth
// bits), and the threads decode them to f16 into one shared tile before the stage's multiplies,
// with dequant8's arithmetic: the values a dequantise-then-GEMM would read, so the bits of the f16
// kernel over those (tested), without writing and re-reading 2 bytes per weight.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <type_traits>

#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/grouped_tile.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_device.cuh"
#include "quant/blocks.h"

namespace ts::cuda {
namespace {

constexpr int kBK = 64;           // K columns per pipeline stage: 128 bytes a row
constexpr int kStages = 4;        // 4 x 24 KiB of shared memory: three stages in flight
constexpr int kChunks = kBK / 8;  // 16-byte chunks per tile row and stage

static_assert(kBN * kChunks == 4 * kThreads && kBM * kChunks == 2 * kThreads,
              "each thread copies four weight chunks and two activation chunks per stage");
static_assert(kChunks == 8, "the swizzle spreads 8 chunks of a row over the 8 rows of an ldmatrix");

// Element offset of 16-byte chunk c of row r in a stage's [*][kBK] array.
__device__ __forceinline__ int swizzled(int r, int c) {
  return r * kBK + (c ^ (r % 8)) * 8;
}

// How a stage's weights become the swizzled [feature row][column] 16-bit tile the mma reads:
// Stage is the weights' part of a pipeline stage, load() issues thread tid's copies of K columns
// [k0, k0 + kBK) into it (zeros past N), tile() returns the tile (kTileBytes of extra shared
// memory it may decode into, every thread taking part).
template <DType T>
struct PlainWeights {
  static constexpr DType kMma = T;
  static constexpr size_t kTileBytes = 0;
  struct Stage {
    uint16_t w[kBN * kBK];
  };
  __device__ static void load(Stage& st, const uint8_t* w, size_t row_stride, int64_t n0, int64_t N,
                              int64_t K, int64_t k0, int tid) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = tid + i * kThreads;
      const int r = c / kChunks, kc = c % kChunks;
      const bool full = n0 + r < N && k0 + kc * 8 < K;
      cp_async16_ahead(smem_addr(st.w + swizzled(r, kc)),
                       full ? w + (n0 + r) * row_stride + (k0 + kc * 8) * 2 : w, full);
    }
  }
  __device__ static const uint16_t* tile(const Stage& st, uint16_t*, int64_t, int) {
    return st.w;
  }
};

// q4_k / q5_k rows: per feature row the block's 16-byte header (d, dmin, scales), the 32 bytes of
// qs whose low / high nibbles are the stage's two sub-blocks, and for q5_k the block's 32 qh bytes
// (bits 2 pair and 2 pair + 1 the fifth bits of those sub-blocks).
template <DType T>
struct KMinWeights {
  static constexpr bool kFifthBit = T == DType::Q5_K;
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  static constexpr DType kMma = DType::F16;
  static constexpr size_t kTileBytes = kBN * kBK * 2;
  static constexpr int kParts = kFifthBit ? 5 : 3;  // header, qs 0..15, qs 16..31, qh 0..15, 16..31
  struct Stage {
    uint4 raw[kBN][kParts];
  };
  static_assert(offsetof(Block, scales) == 4 && offsetof(Block, qs) % 16 == 0 &&
                    sizeof(Block) % 16 == 0 && kBK == 64 && kQKK % kBK == 0,
                "a stage is one sub-block pair of a 16-byte aligned block");
  __device__ static void load(Stage& st, const uint8_t* w, size_t row_stride, int64_t n0, int64_t N,
                              int64_t, int64_t k0, int tid) {
    const int64_t block = k0 / kQKK * static_cast<int64_t>(sizeof(Block));
    const int pair = static_cast<int>(k0 % kQKK / kBK);
    for (int c = tid; c < kBN * kParts; c += kThreads) {
      const int r = c / kParts, part = c % kParts;
      const bool full = n0 + r < N;
      int64_t off = block;
      if (part == 1 || part == 2) off += offsetof(Block, qs) + 32 * pair + 16 * (part - 1);
      if constexpr (kFifthBit)
        if (part >= 3) off += offsetof(Block, qh) + 16 * (part - 3);
      cp_async16_ahead(smem_addr(&st.raw[r][part]), full ? w + (n0 + r) * row_stride + off : w,
                       full);
    }
  }
  // Thread tid decodes four 8-column chunks; chunk kc of a row is sub-block 2 pair + kc / 4
  // (the low nibbles, then the high ones) at qs (and qh) bytes 8 (kc % 4) ..
  __device__ static const uint16_t* tile(const Stage& st, uint16_t* out, int64_t k0, int tid) {
    const int pair = static_cast<int>(k0 % kQKK / kBK);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = tid + i * kThreads;
      const int r = c / kChunks, kc = c % kChunks, n = kc / 4, sub = 2 * pair + n;
      const uint4 head = st.raw[r][0];
      int sc = 0, mn = 0;
      k4_scale_min_head(head, sub, sc, mn);
      // dequant8<Q4_K / Q5_K>'s operations, in its order.
      const float ds =
          half_bits_to_float(static_cast<uint16_t>(head.x & 0xFFFFu)) * static_cast<float>(sc);
      const float dm =
          half_bits_to_float(static_cast<uint16_t>(head.x >> 16)) * static_cast<float>(mn);
      // Bytes 8 (kc % 4) .. + 7 of a 32-byte field held as two 16-byte parts from `part`.
      const auto bytes8 = [&st, r, kc](int part) {
        const uint4 v = st.raw[r][part + (kc % 4) / 2];
        return kc % 2 == 0 ? uint2{v.x, v.y} : uint2{v.z, v.w};
      };
      const uint2 qs = bytes8(1);
      uint2 qh{};
      if constexpr (kFifthBit) qh = bytes8(3);
      __align__(16) __half h[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int shift = 8 * (k % 4);
        int q = static_cast<int>(((k < 4 ? qs.x : qs.y) >> (shift + 4 * n)) & 0x0Fu);
        if constexpr (kFifthBit)
          q |= static_cast<int>(((k < 4 ? qh.x : qh.y) >> (shift + sub)) & 1u) << 4;
        h[k] = __float2half_rn(ds * static_cast<float>(q) - dm);
      }
      *reinterpret_cast<uint4*>(out + swizzled(r, kc)) = *reinterpret_cast<const uint4*>(h);
    }
    __syncthreads();
    return out;
  }
};

template <class W>
struct Stage {
  typename W::Stage w;
  uint16_t x[kBM * kBK];  // [tile row][column], chunks swizzled
};
template <class W>
constexpr size_t kSmemBytes = kStages * sizeof(Stage<W>) + W::kTileBytes;
static_assert(kSmemBytes<PlainWeights<DType::F16>> <= 99 * 1024 &&
                  kSmemBytes<KMinWeights<DType::Q5_K>> <= 99 * 1024,
              "dynamic shared memory of a block on sm_89");

template <class W>
__global__ void __launch_bounds__(kThreads, 2)
    grouped_mma_kernel(const GroupTile* tiles, int64_t N, int64_t K, size_t row_stride,
                       const uint16_t* x, int64_t x_row0, float* y) {
  pdl_enter();
  extern __shared__ uint4 smem[];
  Stage<W>* stages = reinterpret_cast<Stage<W>*>(smem);
  auto* decoded = reinterpret_cast<uint16_t*>(stages + kStages);  // W::kTileBytes
  const GroupTile tile = tiles[blockIdx.x];
  const int rows = static_cast<int>(tile.rows);
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const auto* w = static_cast<const uint8_t*>(tile.w);
  const uint16_t* xt = x + (tile.row - x_row0) * K;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 4, wn = warp % 4;

  // Stage s takes K columns [k0, k0 + kBK); chunks past K, past N or past the tile's rows are
  // zeros (their sources are not read). A row's 8 chunks are 8 neighbouring threads' copies.
  const auto load = [&](int s, int64_t kt) {
    const int64_t k0 = kt * kBK;
    W::load(stages[s].w, w, row_stride, n0, N, K, k0, tid);
    uint16_t* sx = stages[s].x;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int c = tid + i * kThreads;
      const int r = c / kChunks, kc = c % kChunks;
      const bool full = r < rows && k0 + kc * 8 < K;
      cp_async16(smem_addr(sx + swizzled(r, kc)), full ? xt + r * K + k0 + kc * 8 : xt, full);
    }
  };

  float acc[2][4][4] = {};
  // Warps whose rows all lie past the tile's rows skip the multiplies (a small group's tile).
  const bool warp_rows = wm * kWarpRows < rows;
  const bool second_m = wm * kWarpRows + 16 < rows;
  k_pipeline<kStages>((K + kBK - 1) / kBK, load, [&](int s, int64_t kt) {
    const uint16_t* sw = W::tile(stages[s].w, decoded, kt * kBK, tid);
    if (!warp_rows) return;
    const uint16_t* sx = stages[s].x;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t a[2][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int r = wm * kWarpRows + mi * 16 + lane % 8 + (lane / 8 % 2) * 8;
        ldmatrix_x4(a[mi], smem_addr(sx + swizzled(r, 2 * kk + lane / 16)));
      }
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        uint32_t r4[4];
        const int n = wn * kWarpCols + p * 16 + lane % 8 + (lane / 16) * 8;
        ldmatrix_x4(r4, smem_addr(sw + swizzled(n, 2 * kk + lane / 8 % 2)));
        b[2 * p][0] = r4[0], b[2 * p][1] = r4[1], b[2 * p + 1][0] = r4[2], b[2 * p + 1][1] = r4[3];
      }
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        mma<W::kMma>(acc[0][nj], a[0], b[nj][0], b[nj][1]);
        if (second_m) mma<W::kMma>(acc[1][nj], a[1], b[nj][0], b[nj][1]);
      }
    }
  });
  if (warp_rows) store_tile(acc, tile, n0, N, wm, wn, lane, y);
}

template <class W>
void launch_typed(const Weight& shape, const GroupTile* tiles, int64_t n_tiles, const void* x16,
                  int64_t x_row0, float* y, cudaStream_t stream) {
  launch_grouped<grouped_mma_kernel<W>>("grouped matmul", kSmemBytes<W>, shape, tiles, n_tiles, x16,
                                        x_row0, y, stream);
}

}  // namespace

bool grouped_kernels_read(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::Q4_K ||
         t == DType::Q5_K;
}

bool grouped_mma_supported(const Weight& shape, const void* const* weights, int64_t G) {
  if (shape.dtype == DType::Q4_K || shape.dtype == DType::Q5_K)  // 16-byte aligned blocks
    return shape.layout == WeightLayout::Rows && shape.row_stride % 16 == 0 &&
           weights_aligned(weights, G, 16);
  if (shape.dtype != DType::F16 && shape.dtype != DType::BF16) return false;
  if (shape.cols % 8 != 0 || shape.row_stride % 16 != 0) return false;
  return weights_aligned(weights, G, 16);
}

void launch_matmul_grouped(const Weight& shape, const GroupTile* tiles, int64_t n_tiles,
                           const void* x16, int64_t x_row0, float* y, cudaStream_t stream) {
  if (shape.dtype == DType::Q4_K)
    launch_typed<KMinWeights<DType::Q4_K>>(shape, tiles, n_tiles, x16, x_row0, y, stream);
  else if (shape.dtype == DType::Q5_K)
    launch_typed<KMinWeights<DType::Q5_K>>(shape, tiles, n_tiles, x16, x_row0, y, stream);
  else if (shape.dtype == DType::F16)
    launch_typed<PlainWeights<DType::F16>>(shape, tiles, n_tiles, x16, x_row0, y, stream);
  else
    launch_typed<PlainWeights<DType::BF16>>(shape, tiles, n_tiles, x16, x_row0, y, stream);
}

}  // namespace ts::cuda
