// The grouped matmul of the routed experts (Backend::matmul_grouped) on the tensor cores, for f16
// and bf16 weights and q4_k weights (grouped_mma.cu) and q8_0 weights (grouped_mma_q8.cu): one
// launch over every (row tile, output tile) of every group.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/backend.h"

namespace ts::cuda {

// Rows per tile: a group of r rows takes ceil(r / kGroupedTileRows) tiles.
constexpr int64_t kGroupedTileRows = 64;

// Rows [row, row + rows) (rows <= kGroupedTileRows) times the weight at w.
struct GroupTile {
  const void* w = nullptr;
  int64_t row = 0;
  int64_t rows = 0;
};

// The weight types the grouped kernels read themselves (given aligned rows): f16, bf16, q8_0, q4_k,
// q5_k. Experts of other block types are dequantised to f16 first.
bool grouped_kernels_read(DType t);

// True when the kernel takes `shape` with these weights: f16 / bf16 (cols a multiple of 8) or q4_k
// in the file's layout, every row (of every weight) 16-byte aligned. x16 is then bf16 for bf16
// weights, else f16.
bool grouped_mma_supported(const Weight& shape, const void* const* weights, int64_t G);

// y[row] = W x16[row - x_row0] over the `n_tiles` tiles (device memory). x16 holds the input rows
// from x_row0 on, converted to shape.dtype ([*][shape.cols]); y is f32 [*][shape.rows].
void launch_matmul_grouped(const Weight& shape, const GroupTile* tiles, int64_t n_tiles,
                           const void* x16, int64_t x_row0, float* y, cudaStream_t stream);

// True when the q8_0 kernel takes `shape` with these weights: WeightLayout::Q8Groups (cols then a
// multiple of 64) with every weight 16-byte aligned, or the file's layout (WeightLayout::Rows)
// with rows 4-byte aligned. Both layouts give the same bits.
bool grouped_mma_q8_supported(const Weight& shape, const void* const* weights, int64_t G);

// As launch_matmul_grouped, for q8_0 weights; x16 is in f16. A dense matmul of M rows is the same
// call with one weight: tiles of 64 rows from row 0.
void launch_matmul_grouped_q8(const Weight& shape, const GroupTile* tiles, int64_t n_tiles,
                              const void* x16, int64_t x_row0, float* y, cudaStream_t stream);

}  // namespace ts::cuda
