// The panel layouts of q8_0, the 32-element 4- and 5-bit types (mxfp4 among them), q4_k, q5_k, q6_k
// and iq4_xs weights (WeightLayout::Panels), which the AVX512-VNNI kernels of
// matmul_panels_avx512vnni.cpp, matmul_nibble_panels_avx512vnni.cpp,
// matmul_q4k_q5k_panels_avx512vnni.cpp, matmul_q6k_panels_avx512vnni.cpp and
// matmul_iq4xs_panels_avx512vnni.cpp read as they are, so that a prefill matmul no longer regroups
// the weight rows for every micro-batch and a decode matmul reads one stream per panel instead of
// 32 row streams.
//
// The rows are taken kPanelRows at a time. A panel occupies exactly its rows' bytes in the row
// layout (kPanelRows x row_stride from data + panel x kPanelRows x row_stride) but orders them by
// block, so a weight is packed in place and its footprint does not change.
//
// q8_0: the panel's block b, kPanelBlockBytes at panel + b x kPanelBlockBytes, is
//   codes[g][v][j][i] (g < 8, v < 2, j < 16, i < 4; 1024 bytes): code 4g + i of row 16v + j as an
//     unsigned byte, the int8 value + 128. One 64-byte vector (g, v) holds four consecutive codes
//     of sixteen rows: the weight operand of vpdpbusd.
//   d[32]: the rows' f16 scales, row 16v + j at index 16v + j.
// q4_k: the panel's super-block b, kQ4KPanelBytes at panel + b x kQ4KPanelBytes, is
//   nibbles[q][v][j][i] (q < 32, v < 2, j < 16, i < 4; 4096 bytes): code 8q + i of row 16v + j in
//     the low nibble, code 8q + 4 + i in the high one: each 64-byte vector is two vpdpbusd
//     operands once its nibbles are split.
//   w0[32], w1[32], w2[32] (int32): bytes 0-3, 4-7 and 8-11 of each row's twelve packed 6-bit
//     scales and mins, as in the block (see k4_scale_min), so that a vector holds sixteen rows'.
//   d[32], dmin[32]: the rows' f16 scales.
// q5_k: as q4_k, with kQ5KPanelBytes per super-block and, between the nibbles and the words,
//   fifth[c][v][j][i] (c < 8; 1024 bytes): bit k of the byte is the fifth bit of code 32c + 4k + i
//     of row 16v + j: sub-block c's eight code groups.
// q6_k: the panel's super-block b, kQ6KPanelBytes at panel + b x kQ6KPanelBytes, is
//   nibbles[q][v][j][i] as q4_k's: the low four bits of codes 8q + i and 8q + 4 + i;
//   high[o][v][j][i] (o < 16; 2048 bytes): the top two bits of code 16o + 4k + i (k < 4) at
//     bits 2k and 2k + 1: the four code groups of 16-element sub-block o;
//   scales[s][32] (int8): sub-block s's scale of each row; d[32]: the rows' f16 scales.
// q4_0 and iq4_nl: the panel's block b, kNibblePanelBytes at panel + b x kNibblePanelBytes, is
//   nibbles[h][v][j][i] (h < 4, v < 2, j < 16, i < 4; 512 bytes): code 8h + i (q4_0's nibble,
//     iq4_nl's grid index) of row 16v + j in the low nibble, code 8h + 4 + i in the high one;
//   d[32]: the rows' f16 scales.
// q5_0: as q4_0 with kQ5_0PanelBytes per block and, between the nibbles and d,
//   fifth[v][j][i] (128 bytes): bit g of the byte is the fifth bit of code 4g + i of row 16v + j.
// q4_1 and q5_1: as q4_0 and q5_0 (kQ4_1PanelBytes, kQ5_1PanelBytes per block), the rows' f16
//   mins m[32] after d.
// iq4_xs: the panel's super-block b, kIq4XsPanelBytes at panel + b x kIq4XsPanelBytes, is
//   nibbles[q][v][j][i] as q4_k's, of the grid indices;
//   scales_l[32] (u32) and scales_h[32] (u16): each row's scale fields as in its block;
//   d[32]: the rows' f16 scales.
// mxfp4: as q4_0 with kMxfp4PanelBytes per block: the nibbles (e2m1 codes), then e[32], the rows'
//   e8m0 scale bytes. Packed only for the int8-activation kernels (not under TURBOSPARK_ACTS=f32,
//   whose kernels read rows).
// Only weights whose row count is a multiple of kPanelRows are packed; a view of whole panels
// (rows [a, b) with a and b multiples of kPanelRows) is itself a weight in this layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/dtype.h"

namespace ts::cpu {

inline constexpr int64_t kPanelRows = 32;
inline constexpr size_t kPanelCodeBytes = 1024;
inline constexpr size_t kPanelBlockBytes = kPanelCodeBytes + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kNibblePanelD = 512;
inline constexpr size_t kNibblePanelBytes = kNibblePanelD + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kMxfp4PanelE = 512;
inline constexpr size_t kMxfp4PanelBytes = kMxfp4PanelE + kPanelRows;
inline constexpr size_t kQ5_0PanelFifth = 512;
inline constexpr size_t kQ5_0PanelD = kQ5_0PanelFifth + 128;
inline constexpr size_t kQ5_0PanelBytes = kQ5_0PanelD + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kQ4_1PanelD = 512;
inline constexpr size_t kQ4_1PanelM = kQ4_1PanelD + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kQ4_1PanelBytes = kQ4_1PanelM + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kQ5_1PanelFifth = 512;
inline constexpr size_t kQ5_1PanelD = kQ5_1PanelFifth + 128;
inline constexpr size_t kQ5_1PanelM = kQ5_1PanelD + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kQ5_1PanelBytes = kQ5_1PanelM + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kQ4KPanelNibbles = 4096;
inline constexpr size_t kQ4KPanelWords = kQ4KPanelNibbles;  // w0, w1, w2: 128 bytes each
inline constexpr size_t kQ4KPanelD = kQ4KPanelWords + 3 * kPanelRows * sizeof(int32_t);
inline constexpr size_t kQ4KPanelDmin = kQ4KPanelD + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kQ4KPanelBytes = kQ4KPanelDmin + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kQ5KPanelFifth = kQ4KPanelNibbles;
inline constexpr size_t kQ5KPanelWords = kQ5KPanelFifth + 1024;
inline constexpr size_t kQ5KPanelD = kQ5KPanelWords + 3 * kPanelRows * sizeof(int32_t);
inline constexpr size_t kQ5KPanelDmin = kQ5KPanelD + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kQ5KPanelBytes = kQ5KPanelDmin + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kQ6KPanelHigh = kQ4KPanelNibbles;
inline constexpr size_t kQ6KPanelScales = kQ6KPanelHigh + 2048;
inline constexpr size_t kQ6KPanelD = kQ6KPanelScales + 16 * kPanelRows;
inline constexpr size_t kQ6KPanelBytes = kQ6KPanelD + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kIq4XsPanelScalesL = kQ4KPanelNibbles;
inline constexpr size_t kIq4XsPanelScalesH = kIq4XsPanelScalesL + kPanelRows * sizeof(uint32_t);
inline constexpr size_t kIq4XsPanelD = kIq4XsPanelScalesH + kPanelRows * sizeof(uint16_t);
inline constexpr size_t kIq4XsPanelBytes = kIq4XsPanelD + kPanelRows * sizeof(uint16_t);

// Whether a weight of this type and row count can be packed (whatever this CPU has).
bool panel_layout_fits(DType t, int64_t rows);

// Row `row` of a packed weight of type t as floats: what dequantize_row gives for the row before
// packing.
void panel_row_to_f32(DType t, const uint8_t* data, size_t row_stride, int64_t row, int64_t cols,
                      float* out);

}  // namespace ts::cpu
