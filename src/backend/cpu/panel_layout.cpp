#include "backend/cpu/panel_layout.h"

#include <cstring>

#include "quant/blocks.h"
#include "quant/dequant.h"

namespace ts::cpu {

static_assert(kPanelBlockBytes == kPanelRows * sizeof(BlockQ8_0),
              "a packed q8_0 panel must fill exactly its rows' bytes");
static_assert(kQ4KPanelBytes == kPanelRows * sizeof(BlockQ4_K),
              "a packed q4_k panel must fill exactly its rows' bytes");

namespace {

// Row `row`'s super-block as it was in the file, from the packed panel at `panel`.
BlockQ4_K q4k_block(const uint8_t* panel, int64_t row) {
  const int64_t r = row % kPanelRows, v = r / 16, j = r % 16;
  BlockQ4_K b;
  std::memcpy(&b.d, panel + kQ4KPanelD + r * sizeof(uint16_t), sizeof(b.d));
  std::memcpy(&b.dmin, panel + kQ4KPanelDmin + r * sizeof(uint16_t), sizeof(b.dmin));
  for (int w = 0; w < 3; ++w)
    std::memcpy(b.scales + 4 * w, panel + kQ4KPanelWords + (w * kPanelRows + r) * 4, 4);
  uint8_t code[kQKK];
  for (int q = 0; q < kQKK / 8; ++q)
    for (int i = 0; i < 4; ++i) {
      const uint8_t byte = panel[((q * 2 + v) * 16 + j) * 4 + i];
      code[8 * q + i] = byte & 0x0F;
      code[8 * q + 4 + i] = byte >> 4;
    }
  // The file's order: qs[32c + l] holds code 64c + l low and code 64c + 32 + l high.
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      b.qs[32 * c + l] = static_cast<uint8_t>(code[64 * c + l] | code[64 * c + 32 + l] << 4);
  return b;
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
  return (t == DType::Q8_0 || t == DType::Q4_K) && rows > 0 && rows % kPanelRows == 0;
}

void panel_row_to_f32(DType t, const uint8_t* data, size_t row_stride, int64_t row, int64_t cols,
                      float* out) {
  if (t == DType::Q8_0) return q8_0_row_to_f32(data, row_stride, row, cols, out);
  const uint8_t* panel = data + (row / kPanelRows) * kPanelRows * row_stride;
  for (int64_t b = 0; b < cols / kQKK; ++b) {
    const BlockQ4_K block = q4k_block(panel + b * kQ4KPanelBytes, row);
    dequantize_row(DType::Q4_K, reinterpret_cast<const uint8_t*>(&block), out + b * kQKK, kQKK);
  }
}

}  // namespace ts::cpu
