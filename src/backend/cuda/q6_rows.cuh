// Addresses in a q6_k weight of WeightLayout::Q6Rows (backend/weight_layout.h): groups of
// q6_group_rows() rows at w + g * rows * row_stride, as in the file, each holding its rows' blocks'
// bodies (ql, qh, scales: kQ6Body bytes each) back to back, row after row, then the blocks' d
// values (f16) in the same order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/quant_device.cuh"
#include "quant/blocks.h"

namespace ts::cuda {

inline constexpr int kQ6Body = offsetof(BlockQ6_K, d);  // 208 bytes: 13 16-byte vectors
static_assert(kQ6Body % 16 == 0 && offsetof(BlockQ6_K, ql) == 0, "q6_k bodies keep 16 bytes");

// Rows of a group: the fewest whose blocks (210 bytes each, 2 x an odd number) are a whole number
// of 16-byte vectors, so that every group, and every body in it, starts on a 16-byte boundary. A
// power of two.
__host__ __device__ constexpr int64_t q6_group_rows(int64_t cols) {
  const int64_t blocks = cols / kQKK;
  return blocks % 8 == 0 ? 1 : blocks % 4 == 0 ? 2 : blocks % 2 == 0 ? 4 : 8;
}

// Row r of a packed weight: its first block's body, and how far past it its d values lie. The
// GEMV holds a row for its whole run at 48 registers: with the offset in 32 bits rather than a
// second pointer, its indexed kernel spills 8 bytes instead of 20 (ptxas).
struct Q6PackedRow {
  const uint8_t* body;
  uint32_t d_offset;
  __device__ const uint16_t* d() const {
    return reinterpret_cast<const uint16_t*>(body + d_offset);
  }
};

__device__ __forceinline__ Q6PackedRow q6_packed_row(const uint8_t* w, size_t row_stride,
                                                     int64_t cols, int64_t r) {
  // A group's rows are a power of two: a mask, not a 64-bit division. A group's bytes fit shared
  // memory (q6_rows_fit): offsets within it fit 32 bits.
  const auto blocks = static_cast<uint32_t>(cols / kQKK);
  const auto rows = static_cast<uint32_t>(q6_group_rows(cols));
  const uint32_t i = static_cast<uint32_t>(r) & (rows - 1);
  const uint8_t* group = w + (r - i) * static_cast<int64_t>(row_stride);
  // The group's d values follow its rows * blocks bodies; row i's are its i * blocks-th.
  const uint32_t body = i * blocks * kQ6Body, d = rows * blocks * kQ6Body + i * blocks * 2;
  return {group + body, d - body};
}

// Elements e0 .. e0 + 7 of row r of a packed weight (e0 a multiple of 8), as dequant8<Q6_K> gives
// them.
__device__ __forceinline__ void q6_rows_dequant8(const uint8_t* w, size_t row_stride, int64_t cols,
                                                 int64_t r, int64_t e0, float* y) {
  const Q6PackedRow row = q6_packed_row(w, row_stride, cols, r);
  const int64_t b = e0 / kQKK;
  q6k_dequant8(row.body + b * kQ6Body, row.d()[b], static_cast<int>(e0 % kQKK), y);
}

}  // namespace ts::cuda
