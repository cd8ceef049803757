#include "backend/cpu/panel_layout.h"

#include <cstring>

#include "quant/blocks.h"
#include "quant/dequant.h"

namespace ts::cpu {

static_assert(kPanelBlockBytes == kPanelRows * sizeof(BlockQ8_0),
              "a packed panel must fill exactly its rows' bytes");

bool panel_layout_fits(DType t, int64_t rows) {
  return t == DType::Q8_0 && rows > 0 && rows % kPanelRows == 0;
}

void panel_row_to_f32(const uint8_t* data, size_t row_stride, int64_t row, int64_t cols,
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

}  // namespace ts::cpu
