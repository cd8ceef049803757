#include "backend/cpu/panel_layout.h"

#include <cstring>
#include <type_traits>

#include "backend/cpu/matmul_kernels.h"
#include "quant/blocks.h"
#include "quant/dequant.h"

namespace ts::cpu {

static_assert(kPanelBlockBytes == kPanelRows * sizeof(BlockQ8_0),
              "a packed q8_0 panel must fill exactly its rows' bytes");
static_assert(kNibblePanelBytes == kPanelRows * sizeof(BlockQ4_0) &&
                  kNibblePanelBytes == kPanelRows * sizeof(BlockIQ4_NL),
              "a packed q4_0 / iq4_nl panel must fill exactly its rows' bytes");
static_assert(kQ5_0PanelBytes == kPanelRows * sizeof(BlockQ5_0),
              "a packed q5_0 panel must fill exactly its rows' bytes");
static_assert(kQ4_1PanelBytes == kPanelRows * sizeof(BlockQ4_1) &&
                  kQ5_1PanelBytes == kPanelRows * sizeof(BlockQ5_1),
              "packed q4_1 / q5_1 panels must fill exactly their rows' bytes");
static_assert(kQ4KPanelBytes == kPanelRows * sizeof(BlockQ4_K),
              "a packed q4_k panel must fill exactly its rows' bytes");
static_assert(kQ5KPanelBytes == kPanelRows * sizeof(BlockQ5_K),
              "a packed q5_k panel must fill exactly its rows' bytes");
static_assert(kQ6KPanelBytes == kPanelRows * sizeof(BlockQ6_K),
              "a packed q6_k panel must fill exactly its rows' bytes");
static_assert(kIq4XsPanelBytes == kPanelRows * sizeof(BlockIQ4_XS),
              "a packed iq4_xs panel must fill exactly its rows' bytes");

namespace {

// The low four bits of row r's first n codes (32 or 256) in a block of a panel with a nibble plane.
void panel_nibbles(const uint8_t* panel, int64_t r, int n, uint8_t* code) {
  const int64_t v = r / 16, j = r % 16;
  for (int q = 0; q < n / 8; ++q)
    for (int i = 0; i < 4; ++i) {
      const uint8_t byte = panel[((q * 2 + v) * 16 + j) * 4 + i];
      code[8 * q + i] = byte & 0x0F;
      code[8 * q + 4 + i] = byte >> 4;
    }
}

// Row `row`'s super-block as it was in the file, from the packed q4_k / q5_k panel at `panel`
// whose words, d and dmin start at the given offsets (q5_k: and fifth bits at kQ5KPanelFifth).
template <class Block>
Block k4_block(const uint8_t* panel, int64_t row, size_t words, size_t d, size_t dmin) {
  const int64_t r = row % kPanelRows, v = r / 16, j = r % 16;
  Block b;
  std::memcpy(&b.d, panel + d + r * sizeof(uint16_t), sizeof(b.d));
  std::memcpy(&b.dmin, panel + dmin + r * sizeof(uint16_t), sizeof(b.dmin));
  for (int w = 0; w < 3; ++w)
    std::memcpy(b.scales + 4 * w, panel + words + (w * kPanelRows + r) * 4, 4);
  uint8_t code[kQKK];
  panel_nibbles(panel, r, kQKK, code);
  // The file's order: qs[32c + l] holds code 64c + l low and code 64c + 32 + l high.
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      b.qs[32 * c + l] = static_cast<uint8_t>(code[64 * c + l] | code[64 * c + 32 + l] << 4);
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    // qh[l] bit c is the fifth bit of code 32c + l.
    std::memset(b.qh, 0, sizeof(b.qh));
    for (int c = 0; c < 8; ++c)
      for (int k = 0; k < 8; ++k)
        for (int i = 0; i < 4; ++i) {
          const uint8_t fifth = panel[kQ5KPanelFifth + ((c * 2 + v) * 16 + j) * 4 + i];
          b.qh[4 * k + i] |= static_cast<uint8_t>(((fifth >> k) & 1) << c);
        }
  }
  return b;
}

BlockQ6_K q6k_block(const uint8_t* panel, int64_t row) {
  const int64_t r = row % kPanelRows, v = r / 16, j = r % 16;
  BlockQ6_K b;
  std::memcpy(&b.d, panel + kQ6KPanelD + r * sizeof(uint16_t), sizeof(b.d));
  for (int s = 0; s < kQKK / 16; ++s)
    b.scales[s] = static_cast<int8_t>(panel[kQ6KPanelScales + s * kPanelRows + r]);
  uint8_t code[kQKK];
  panel_nibbles(panel, r, kQKK, code);
  for (int o = 0; o < kQKK / 16; ++o)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 4; ++i) {
        const uint8_t high = panel[kQ6KPanelHigh + ((o * 2 + v) * 16 + j) * 4 + i];
        code[16 * o + 4 * k + i] |= ((high >> (2 * k)) & 3) << 4;
      }
  // The file's order: ql[64h + l] holds codes 128h + l and + 64 (low, high nibble), ql[64h + 32 +
  // l] codes 128h + 32 + l and + 96; qh[32h + l] their top bits, two bits each, in that order.
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* c = code + 128 * h + l;
      b.ql[64 * h + l] = static_cast<uint8_t>((c[0] & 0xF) | (c[64] & 0xF) << 4);
      b.ql[64 * h + 32 + l] = static_cast<uint8_t>((c[32] & 0xF) | (c[96] & 0xF) << 4);
      b.qh[32 * h + l] = static_cast<uint8_t>(c[0] >> 4 | (c[32] >> 4) << 2 | (c[64] >> 4) << 4 |
                                              (c[96] >> 4) << 6);
    }
  return b;
}

BlockIQ4_XS iq4xs_block(const uint8_t* panel, int64_t row) {
  const int64_t r = row % kPanelRows;
  BlockIQ4_XS b;
  std::memcpy(&b.d, panel + kIq4XsPanelD + r * sizeof(uint16_t), sizeof(b.d));
  std::memcpy(&b.scales_h, panel + kIq4XsPanelScalesH + r * sizeof(uint16_t), sizeof(b.scales_h));
  std::memcpy(b.scales_l, panel + kIq4XsPanelScalesL + r * sizeof(uint32_t), sizeof(b.scales_l));
  uint8_t code[kQKK];
  panel_nibbles(panel, r, kQKK, code);
  // The file's order: qs[16j + l] holds code 32j + l low and code 32j + 16 + l high.
  for (int j = 0; j < kQKK / 32; ++j)
    for (int l = 0; l < 16; ++l)
      b.qs[16 * j + l] = static_cast<uint8_t>(code[32 * j + l] | code[32 * j + 16 + l] << 4);
  return b;
}

// Where a 32-element 4- or 5-bit type's packed block keeps its fifth bits and mins (0: none).
struct NibbleLayout {
  size_t bytes, fifth, d, m;
};

// Row `row`'s blocks as they were in the file, from a q4_0 / iq4_nl / q5_0 / q4_1 / q5_1 / mxfp4
// panel (d or e, m where the type has one, qh where it has fifth bits, then 16 bytes of nibbles,
// element i < 16 low and i + 16 high in qs[i]; bit i of qh the fifth bit of element i),
// dequantised.
template <class Block>
void nibble_row_to_f32(DType t, NibbleLayout at, const uint8_t* data, size_t row_stride,
                       int64_t row, int64_t cols, float* out) {
  const uint8_t* panel = data + (row / kPanelRows) * kPanelRows * row_stride;
  const int64_t r = row % kPanelRows, v = r / 16, j = r % 16;
  for (int64_t b = 0; b < cols / kQK32; ++b) {
    const uint8_t* block = panel + b * at.bytes;
    uint8_t code[kQK32];
    panel_nibbles(block, r, kQK32, code);
    Block blk;
    if constexpr (requires { blk.e; })
      blk.e = block[at.d + r];
    else
      std::memcpy(&blk.d, block + at.d + r * sizeof(uint16_t), sizeof(blk.d));
    for (int i = 0; i < kQK32 / 2; ++i)
      blk.qs[i] = static_cast<uint8_t>(code[i] | code[i + 16] << 4);
    if constexpr (requires { blk.m; })
      std::memcpy(&blk.m, block + at.m + r * sizeof(uint16_t), sizeof(blk.m));
    if constexpr (requires { blk.qh; }) {
      uint32_t qh = 0;
      for (int g = 0; g < 8; ++g)
        for (int i = 0; i < 4; ++i) {
          const uint8_t fifth = block[at.fifth + (v * 16 + j) * 4 + i];
          qh |= static_cast<uint32_t>((fifth >> g) & 1) << (4 * g + i);
        }
      std::memcpy(blk.qh, &qh, sizeof(qh));
    }
    dequantize_row(t, &blk, out + b * kQK32, kQK32);
  }
}

void q8_0_row_to_f32(const uint8_t* data, size_t row_stride, int64_t row, int64_t cols,
                     float* out) {
  const uint8_t* panel = data + (row / kPanelRows) * kPanelRows * row_stride;
  const int64_t r = row % kPanelRows, v = r / 16, j = r % 16;
  for (int64_t b = 0; b < cols / kQK32; ++b) {
    const uint8_t* block = panel + b * kPanelBlockBytes;
    uint16_t d;
    std::memcpy(&d, block + kPanelCodeBytes + r * sizeof(uint16_t), sizeof(d));
    const float scale = f16_to_f32(d);
    for (int64_t k = 0; k < kQK32; ++k) {
      const int64_t g = k / 4, i = k % 4;
      const uint8_t code = block[((g * 2 + v) * 16 + j) * 4 + i];
      out[b * kQK32 + k] = scale * static_cast<float>(static_cast<int>(code) - 128);
    }
  }
}

}  // namespace

bool panel_layout_fits(DType t, int64_t rows) {
  return (t == DType::Q8_0 || t == DType::Q4_0 || t == DType::IQ4_NL || t == DType::Q5_0 ||
          t == DType::Q4_1 || t == DType::Q5_1 || t == DType::Q4_K || t == DType::Q5_K ||
          t == DType::Q6_K || t == DType::IQ4_XS ||
          (t == DType::MXFP4 && !f32_activations_requested())) &&
         rows > 0 && rows % kPanelRows == 0;
}

void panel_row_to_f32(DType t, const uint8_t* data, size_t row_stride, int64_t row, int64_t cols,
                      float* out) {
  if (t == DType::Q8_0) return q8_0_row_to_f32(data, row_stride, row, cols, out);
  const NibbleLayout nibbles{kNibblePanelBytes, 0, kNibblePanelD, 0};
  if (t == DType::Q4_0)
    return nibble_row_to_f32<BlockQ4_0>(t, nibbles, data, row_stride, row, cols, out);
  if (t == DType::IQ4_NL)
    return nibble_row_to_f32<BlockIQ4_NL>(t, nibbles, data, row_stride, row, cols, out);
  if (t == DType::MXFP4)
    return nibble_row_to_f32<BlockMXFP4>(t, {kMxfp4PanelBytes, 0, kMxfp4PanelE, 0}, data,
                                         row_stride, row, cols, out);
  if (t == DType::Q5_0)
    return nibble_row_to_f32<BlockQ5_0>(t, {kQ5_0PanelBytes, kQ5_0PanelFifth, kQ5_0PanelD, 0}, data,
                                        row_stride, row, cols, out);
  if (t == DType::Q4_1)
    return nibble_row_to_f32<BlockQ4_1>(t, {kQ4_1PanelBytes, 0, kQ4_1PanelD, kQ4_1PanelM}, data,
                                        row_stride, row, cols, out);
  if (t == DType::Q5_1)
    return nibble_row_to_f32<BlockQ5_1>(
        t, {kQ5_1PanelBytes, kQ5_1PanelFifth, kQ5_1PanelD, kQ5_1PanelM}, data, row_stride, row,
        cols, out);
  const uint8_t* panel = data + (row / kPanelRows) * kPanelRows * row_stride;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    if (t == DType::Q4_K) {
      const auto block = k4_block<BlockQ4_K>(panel + b * kQ4KPanelBytes, row, kQ4KPanelWords,
                                             kQ4KPanelD, kQ4KPanelDmin);
      dequantize_row(t, &block, out + b * kQKK, kQKK);
    } else if (t == DType::Q5_K) {
      const auto block = k4_block<BlockQ5_K>(panel + b * kQ5KPanelBytes, row, kQ5KPanelWords,
                                             kQ5KPanelD, kQ5KPanelDmin);
      dequantize_row(t, &block, out + b * kQKK, kQKK);
    } else if (t == DType::Q6_K) {
      const BlockQ6_K block = q6k_block(panel + b * kQ6KPanelBytes, row);
      dequantize_row(t, &block, out + b * kQKK, kQKK);
    } else {
      const BlockIQ4_XS block = iq4xs_block(panel + b * kIq4XsPanelBytes, row);
      dequantize_row(t, &block, out + b * kQKK, kQKK);
    }
  }
}

}  // namespace ts::cpu
