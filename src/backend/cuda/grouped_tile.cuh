// The tiling of the grouped tensor-core kernels (grouped_mma.cu for f16 / bf16 weights,
// grouped_mma_q8.cu for q8_0): a block computes one tile of up to 64 rows of one group times 128
// output features; its 8 warps each own 32 rows x 32 features, 2 x 4 mma.sync m16n8k16 tiles of
// f32 accumulators, which store_tile() writes out. The K loop is k_pipeline().
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/pdl.cuh"

namespace ts::cuda {

constexpr int kBM = static_cast<int>(kGroupedTileRows);
constexpr int kBN = 128;   // output features per block
constexpr int kWarps = 8;  // 2 (rows) x 4 (features)
constexpr int kThreads = kWarps * 32;
constexpr int kWarpRows = kBM / 2;  // 32: two m16 tiles
constexpr int kWarpCols = kBN / 4;  // 32: four n8 tiles

// Whether each of the G weights starts on a `bytes` boundary (what the kernels' copies need).
inline bool weights_aligned(const void* const* weights, int64_t G, uintptr_t bytes) {
  for (int64_t g = 0; g < G; ++g)
    if (reinterpret_cast<uintptr_t>(weights[g]) % bytes != 0) return false;
  return true;
}

// Lets Kernel take `bytes` of dynamic shared memory (past the 48 KiB default) and all of the
// unified cache as shared memory (the default split may leave room for fewer blocks a
// multiprocessor); once per kernel, on the device of its first launch.
template <auto Kernel>
void allow_shared_memory(size_t bytes, const char* what) {
  static const cudaError_t status = [bytes] {
    const cudaError_t e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(bytes));
    if (e != cudaSuccess) return e;
    return cudaFuncSetAttribute(Kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                cudaSharedmemCarveoutMaxShared);
  }();
  check(status, what);
}

// One launch of a grouped kernel (both kernels take these parameters): a block per row tile and
// 128 output features, `smem` bytes of dynamic shared memory.
template <auto Kernel>
void launch_grouped(const char* what, size_t smem, const Weight& shape, const GroupTile* tiles,
                    int64_t n_tiles, const void* x16, int64_t x_row0, float* y,
                    cudaStream_t stream) {
  allow_shared_memory<Kernel>(smem, what);
  const dim3 grid(static_cast<unsigned>(n_tiles),
                  static_cast<unsigned>((shape.rows + kBN - 1) / kBN));
  launch(what, Kernel, grid, kThreads, smem, stream, tiles, shape.rows, shape.cols,
         shape.row_stride, static_cast<const uint16_t*>(x16), x_row0, y);
}

// The K loop over nk steps, a cp.async pipeline of Stages shared-memory stages (Stages - 1 steps
// in flight while one is computed): load(s, kt) issues the copies of step kt into stage s,
// compute(s, kt) multiplies stage s. Steps are computed in ascending order.
template <int Stages, class Load, class Compute>
__device__ __forceinline__ void k_pipeline(int64_t nk, const Load& load, const Compute& compute) {
#pragma unroll
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < nk) load(s, s);
    cp_async_commit();
  }
  for (int64_t kt = 0; kt < nk; ++kt) {
    cp_async_wait<Stages - 2>();
    __syncthreads();
    // The stage refilled here was computed in iteration kt - 1, which every thread has left.
    if (kt + Stages - 1 < nk) load(static_cast<int>((kt + Stages - 1) % Stages), kt + Stages - 1);
    cp_async_commit();
    compute(static_cast<int>(kt % Stages), kt);
  }
  cp_async_wait<0>();
}

// Warp (wm, wn)'s accumulators, in the m16n8 C fragment layout (lane / 4 and lane / 4 + 8 are the
// rows, 2 (lane % 4) and the next the features), to y [*][N]: tile row r is y row tile.row + r.
// Rows past tile.rows and features past N are not written.
__device__ __forceinline__ void store_tile(const float (&acc)[2][4][4], const GroupTile& tile,
                                           int64_t n0, int64_t N, int wm, int wn, int lane,
                                           float* y) {
  const int rows = static_cast<int>(tile.rows);
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = wm * kWarpRows + mi * 16 + lane / 4 + half * 8;
      if (r >= rows) continue;
      float* yr = y + (tile.row + r) * N;
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        const int64_t n = n0 + wn * kWarpCols + nj * 8 + (lane % 4) * 2;
        if (n < N) yr[n] = acc[mi][nj][2 * half];
        if (n + 1 < N) yr[n + 1] = acc[mi][nj][2 * half + 1];
      }
    }
}

}  // namespace ts::cuda
