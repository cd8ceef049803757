// The panel layout of q8_0 weights (WeightLayout::Panels), which the AVX512-VNNI kernels of
// matmul_panels_avx512vnni.cpp read as they are, so that a prefill matmul no longer regroups the
// weight rows for every micro-batch and a decode matmul reads one stream per panel instead of 32
// row streams.
//
// The rows are taken kPanelRows at a time. A panel occupies exactly its rows' bytes in the row
// layout (kPanelRows x row_stride from data + panel x kPanelRows x row_stride) but orders them by
// block: the panel's block b, kPanelBlockBytes at panel + b x kPanelBlockBytes, is
//   codes[g][v][j][i] (g < 8, v < 2, j < 16, i < 4; 1024 bytes): code 4g + i of row 16v + j as an
//     unsigned byte, the int8 value + 128. One 64-byte vector (g, v) holds four consecutive codes
//     of sixteen rows: the weight operand of vpdpbusd.
//   d[32]: the rows' f16 scales, row 16v + j at index 16v + j.
// That is 32 x 34 bytes, the size of the 32 rows' q8_0 blocks, so a weight is packed in place and
// its footprint does not change. Only weights whose row count is a multiple of kPanelRows are
// packed; a view of whole panels (rows [a, b) with a and b multiples of kPanelRows) is itself a
// weight in this layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/dtype.h"

namespace ts::cpu {

inline constexpr int64_t kPanelRows = 32;
inline constexpr size_t kPanelCodeBytes = 1024;
inline constexpr size_t kPanelBlockBytes = kPanelCodeBytes + kPanelRows * sizeof(uint16_t);

// Whether a weight of this type and row count can be packed (whatever this CPU has).
bool panel_layout_fits(DType t, int64_t rows);

// Row `row` of a packed weight as floats: what dequantize_row gives for the row before packing.
void panel_row_to_f32(const uint8_t* data, size_t row_stride, int64_t row, int64_t cols,
                      float* out);

}  // namespace ts::cpu
