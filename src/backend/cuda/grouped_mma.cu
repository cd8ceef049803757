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
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/grouped_tile.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"

namespace ts::cuda {
namespace {

constexpr int kBK = 64;           // K columns per pipeline stage: 128 bytes a row
constexpr int kStages = 4;        // 4 x 24 KiB of shared memory: three stages in flight
constexpr int kChunks = kBK / 8;  // 16-byte chunks per tile row and stage

struct Stage {
  uint16_t w[kBN * kBK];  // [feature row][column], chunks swizzled
  uint16_t x[kBM * kBK];  // [tile row][column], chunks swizzled
};
constexpr size_t kSmemBytes = kStages * sizeof(Stage);
static_assert(kSmemBytes <= 99 * 1024, "dynamic shared memory of a block on sm_89");

static_assert(kBN * kChunks == 4 * kThreads && kBM * kChunks == 2 * kThreads,
              "each thread copies four weight chunks and two activation chunks per stage");
static_assert(kChunks == 8, "the swizzle spreads 8 chunks of a row over the 8 rows of an ldmatrix");

// Element offset of 16-byte chunk c of row r in a stage's [*][kBK] array.
__device__ __forceinline__ int swizzled(int r, int c) {
  return r * kBK + (c ^ (r % 8)) * 8;
}

template <DType T>
__global__ void __launch_bounds__(kThreads, 2)
    grouped_mma_kernel(const GroupTile* tiles, int64_t N, int64_t K, int64_t ldw, const uint16_t* x,
                       int64_t x_row0, float* y) {
  pdl_enter();
  extern __shared__ uint4 smem[];
  Stage* stages = reinterpret_cast<Stage*>(smem);
  const GroupTile tile = tiles[blockIdx.x];
  const int rows = static_cast<int>(tile.rows);
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const auto* w = static_cast<const uint16_t*>(tile.w);
  const uint16_t* xt = x + (tile.row - x_row0) * K;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 4, wn = warp % 4;

  // Stage s takes K columns [k0, k0 + kBK); chunks past K, past N or past the tile's rows are
  // zeros (their sources are not read). A row's 8 chunks are 8 neighbouring threads' copies.
  const auto load = [&](int s, int64_t kt) {
    const int64_t k0 = kt * kBK;
    uint16_t* sw = stages[s].w;
    uint16_t* sx = stages[s].x;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = tid + i * kThreads;
      const int r = c / kChunks, kc = c % kChunks;
      const bool full = n0 + r < N && k0 + kc * 8 < K;
      cp_async16_ahead(smem_addr(sw + swizzled(r, kc)), full ? w + (n0 + r) * ldw + k0 + kc * 8 : w,
                       full);
    }
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
  k_pipeline<kStages>((K + kBK - 1) / kBK, load, [&](int s, int64_t) {
    if (!warp_rows) return;
    const uint16_t* sw = stages[s].w;
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
        mma<T>(acc[0][nj], a[0], b[nj][0], b[nj][1]);
        if (second_m) mma<T>(acc[1][nj], a[1], b[nj][0], b[nj][1]);
      }
    }
  });
  if (warp_rows) store_tile(acc, tile, n0, N, wm, wn, lane, y);
}

template <DType T>
void launch_typed(const Weight& shape, const GroupTile* tiles, int64_t n_tiles, const void* x16,
                  int64_t x_row0, float* y, cudaStream_t stream) {
  allow_shared_memory<grouped_mma_kernel<T>>(kSmemBytes, "grouped matmul shared memory");
  const dim3 grid(static_cast<unsigned>(n_tiles),
                  static_cast<unsigned>((shape.rows + kBN - 1) / kBN));
  launch("grouped matmul", grouped_mma_kernel<T>, grid, kThreads, kSmemBytes, stream, tiles,
         shape.rows, shape.cols, static_cast<int64_t>(shape.row_stride / 2),
         static_cast<const uint16_t*>(x16), x_row0, y);
}

}  // namespace

bool grouped_mma_supported(const Weight& shape, const void* const* weights, int64_t G) {
  if (shape.dtype != DType::F16 && shape.dtype != DType::BF16) return false;
  if (shape.cols % 8 != 0 || shape.row_stride % 16 != 0) return false;
  return weights_aligned(weights, G, 16);
}

void launch_matmul_grouped(const Weight& shape, const GroupTile* tiles, int64_t n_tiles,
                           const void* x16, int64_t x_row0, float* y, cudaStream_t stream) {
  if (shape.dtype == DType::F16)
    launch_typed<DType::F16>(shape, tiles, n_tiles, x16, x_row0, y, stream);
  else
    launch_typed<DType::BF16>(shape, tiles, n_tiles, x16, x_row0, y, stream);
}

}  // namespace ts::cuda
