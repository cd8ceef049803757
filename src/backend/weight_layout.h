// How the bytes of an uploaded weight are arranged (Weight::layout, cpu::WeightView::layout).
#pragma once

#include <cstdint>

namespace ts {

enum class WeightLayout : uint8_t {
  // The file's rows: row r at data + r * row_stride. Every backend reads this layout.
  Rows,
  // q8_0, q4_k, q5_k or q6_k rows grouped in panels of 32 for the CPU's AVX512-VNNI kernels,
  // packed in place by Backend::pack_weight(); backend/cpu/panel_layout.h gives the byte order.
  Panels,
  // q8_0 rows in groups of kQ8GroupRows for the CUDA decode GEMV, rearranged on the device by
  // Backend::pack_weight(): each group's codes first (row after row, `cols` bytes each), then its
  // scales (row after row, cols / 32 f16 each). The codes then load as aligned 16-byte vectors.
  // backend/cuda/q8_groups.cuh gives the addresses.
  Q8Groups,
  // q6_k rows for the CUDA decode GEMV, rearranged in place by Backend::pack_weight() (same bytes,
  // same row_stride) in groups of the fewest rows whose bytes are a whole number of 16-byte
  // vectors (1 row of 8 blocks or a multiple of 8, 8 rows of 3 blocks): the group's blocks
  // without their d (ql, qh, scales: 208 bytes each, so that they stay on 16-byte boundaries),
  // row after row, then their d values (f16 each) in the same order. The quants then load as
  // aligned 16-byte vectors. backend/cuda/q6_rows.cuh gives the addresses.
  Q6Rows,
};

// Rows per group of WeightLayout::Q8Groups.
inline constexpr int64_t kQ8GroupRows = 4;
// Rows per group of WeightLayout::Q6Rows at most (a view must start at a group's first row).
inline constexpr int64_t kQ6MaxGroupRows = 8;

}  // namespace ts
