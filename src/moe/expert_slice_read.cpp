#include "moe/expert_slice_read.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "quant/blocks.h"
#include "quant/mxfp4_planes.h"

namespace ts {
namespace {

// e8m0's 0xFF is NaN (OCP MX v1.0): a block scaled by it has no value. Checked on every read, the
// one pass over an expert's bytes (resident experts are all read at open).
void check_mxfp4_scales(const uint8_t* bytes, uint64_t begin, uint64_t end,
                        const std::string& where) {
  constexpr uint64_t kBlock = sizeof(BlockMXFP4);
  for (uint64_t o = (begin + kBlock - 1) / kBlock * kBlock; o < end; o += kBlock)
    if (bytes[o - begin] == 0xFF)
      fail(ErrorKind::Model, where + ": MXFP4 block " + std::to_string(o / kBlock) +
                                 " has the e8m0 scale 0xFF (NaN)");
}

// SliceLayout::Columns: row r of the slice is column first + r * step of the source matrix.
template <typename Elem>
void transpose_columns(const ExpertSlice& s, const uint8_t* src, uint8_t* dst) {
  const auto* in = reinterpret_cast<const Elem*>(src);
  auto* out = reinterpret_cast<Elem*>(dst);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < s.cols; ++c)
      out[r * s.cols + c] = in[c * s.src_width + s.first + r * s.step];
}

// A slice stored otherwise than as its rows: its whole source read, rearranged, then cut.
void read_rearranged(const ExpertSlice& s, uint8_t* dst, uint64_t begin, uint64_t end,
                     const std::string& where) {
  std::vector<uint8_t> src(s.src_bytes);
  read_exact(s.file->fd(), src.data(), s.src_bytes, s.offset, where, ErrorKind::Runtime);
  std::vector<uint8_t> rows(s.nbytes);
  if (s.layout == SliceLayout::Columns && s.dtype == DType::F32) {
    transpose_columns<uint32_t>(s, src.data(), rows.data());
  } else if (s.layout == SliceLayout::Columns) {
    transpose_columns<uint16_t>(s, src.data(), rows.data());  // f16, bf16
  } else {
    std::vector<uint8_t> scales(s.scale_bytes);
    read_exact(s.file->fd(), scales.data(), s.scale_bytes, s.scale_offset, where,
               ErrorKind::Runtime);
    mxfp4_planes_to_blocks(src.data(), scales.data(), s.rows, s.cols / kQK32, s.first, s.step,
                           rows.data());
  }
  std::memcpy(dst, rows.data() + begin, end - begin);
}

}  // namespace

void check_expert_slice(const ExpertSlice& s, const uint8_t* bytes, const std::string& what) {
  if (s.dtype == DType::MXFP4) check_mxfp4_scales(bytes, 0, s.nbytes, what);
}

void read_expert_slice(const ExpertSlice& s, uint8_t* dst, uint64_t begin, uint64_t end,
                       const std::string& what) {
  const std::string where = s.file->path() + ": " + what;
  if (s.layout == SliceLayout::Rows)
    read_exact(s.file->fd(), dst, end - begin, s.offset + begin, where, ErrorKind::Runtime);
  else
    read_rearranged(s, dst, begin, end, where);
  if (s.dtype == DType::MXFP4) check_mxfp4_scales(dst, begin, end, where);
}

}  // namespace ts
