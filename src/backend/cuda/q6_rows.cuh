// Addresses in a q6_k weight of WeightLayout::Q6Rows (backend/weight_layout.h): row r at
// w + r * row_stride, as in the file, holding its blocks' bodies (ql, qh, scales: kQ6Body bytes
// each) back to back, then the blocks' d values (cols / 256 f16).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/quant_device.cuh"
#include "quant/blocks.h"

namespace ts::cuda {

inline constexpr int kQ6Body = offsetof(BlockQ6_K, d);  // 208 bytes: 13 16-byte vectors
static_assert(kQ6Body % 16 == 0 && offsetof(BlockQ6_K, ql) == 0, "q6_k bodies keep 16 bytes");

// The body of block b of a packed row.
__device__ __forceinline__ const uint8_t* q6_body(const uint8_t* row, int64_t b) {
  return row + b * kQ6Body;
}

// The d values of a packed row of `cols` elements: one per block.
__device__ __forceinline__ const uint16_t* q6_d(const uint8_t* row, int64_t cols) {
  return reinterpret_cast<const uint16_t*>(row + cols / kQKK * kQ6Body);
}

// Elements e0 .. e0 + 7 of a packed row (e0 a multiple of 8), as dequant8<Q6_K> gives them.
__device__ __forceinline__ void q6_rows_dequant8(const uint8_t* row, int64_t cols, int64_t e0,
                                                 float* y) {
  const int64_t b = e0 / kQKK;
  q6k_dequant8(q6_body(row, b), q6_d(row, cols)[b], static_cast<int>(e0 % kQKK), y);
}

}  // namespace ts::cuda
