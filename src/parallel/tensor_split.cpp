#include "parallel/tensor_split.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace ts {

std::vector<uint8_t> take_rows(const HostMatrix& w, const std::vector<RowRange>& ranges) {
  std::vector<uint8_t> out;
  for (const RowRange& r : ranges) {
    if (r.row0 < 0 || r.rows < 0 || r.row0 + r.rows > w.rows)
      fail(ErrorKind::Runtime, "internal: rows [" + std::to_string(r.row0) + ", " +
                                   std::to_string(r.row0 + r.rows) + ") of a weight of " +
                                   std::to_string(w.rows) + " rows");
    const auto* src =
        static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r.row0) * w.row_stride;
    out.insert(out.end(), src, src + static_cast<size_t>(r.rows) * w.row_stride);
  }
  return out;
}

std::vector<uint8_t> take_columns(const HostMatrix& w, int64_t col0, int64_t cols) {
  if (col0 < 0 || cols < 0 || col0 + cols > w.cols)
    fail(ErrorKind::Runtime, "internal: columns [" + std::to_string(col0) + ", " +
                                 std::to_string(col0 + cols) + ") of a weight of " +
                                 std::to_string(w.cols) + " columns");
  const std::string what =
      std::string("a tensor-parallel shard of a ") + dtype_name(w.dtype) + " weight";
  const uint64_t skip = row_bytes(w.dtype, static_cast<uint64_t>(col0), what);
  const uint64_t keep = row_bytes(w.dtype, static_cast<uint64_t>(cols), what);
  std::vector<uint8_t> out(static_cast<size_t>(keep) * static_cast<size_t>(w.rows));
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r)
    std::memcpy(out.data() + static_cast<size_t>(r) * keep,
                src + static_cast<size_t>(r) * w.row_stride + skip, keep);
  return out;
}

std::vector<RowRange> qkv_rows(const RankSlice& s, int64_t n_head, int64_t n_head_kv,
                               int64_t head_dim) {
  const int64_t k0 = n_head * head_dim, v0 = k0 + n_head_kv * head_dim;
  return {{s.head0 * head_dim, s.heads * head_dim},
          {k0 + s.kv_head0 * head_dim, s.kv_heads * head_dim},
          {v0 + s.kv_head0 * head_dim, s.kv_heads * head_dim}};
}

std::vector<RowRange> gate_up_rows(const RankSlice& s, int64_t n_ff) {
  return {{s.ff0, s.ffs}, {n_ff + s.ff0, s.ffs}};
}

}  // namespace ts
