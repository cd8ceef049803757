// Tensor parallelism's shards of a layer's weights, cut from the file's row layout before the
// backend packs them (docs/PARALLEL.md). A column-parallel weight (q / k / v, gate / up) keeps the
// rows of the rank's heads or FFN columns; a row-parallel one (attention output, down) keeps the
// same heads' or columns' part of every row, whole blocks of its type.
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/partition.h"
#include "quant/dtype.h"

namespace ts {

// A weight in host memory, the file's row layout.
struct HostMatrix {
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;
  const void* data = nullptr;
};

struct RowRange {
  int64_t row0 = 0;
  int64_t rows = 0;
};

// The rows of `ranges`, in their order, packed (row_stride kept).
std::vector<uint8_t> take_rows(const HostMatrix& w, const std::vector<RowRange>& ranges);
// Columns [col0, col0 + cols) of every row, packed at the row size of `cols` elements; fails
// (naming the weight's type) unless both ends fall on block boundaries.
std::vector<uint8_t> take_columns(const HostMatrix& w, int64_t col0, int64_t cols);

// Rank s's rows of a stacked [q | k | v] weight (n_head, then n_head_kv and n_head_kv heads of
// head_dim rows): its q heads, then its kv heads' k and v rows.
std::vector<RowRange> qkv_rows(const RankSlice& s, int64_t n_head, int64_t n_head_kv,
                               int64_t head_dim);
// Rank s's rows of a stacked [gate | up] weight of n_ff rows each: its gate rows, then its up rows.
std::vector<RowRange> gate_up_rows(const RankSlice& s, int64_t n_ff);

}  // namespace ts
