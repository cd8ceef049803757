#include "quant/mxfp4_planes.h"

#include <cstring>

#include "quant/blocks.h"

namespace ts {

void mxfp4_planes_to_blocks(const uint8_t* planes, const uint8_t* scales, int64_t rows,
                            int64_t blocks_per_row, int64_t first, int64_t step, uint8_t* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src_row = first + r * step;
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const uint8_t* q = planes + (src_row * blocks_per_row + b) * 16;
      BlockMXFP4 out;
      out.e = scales[src_row * blocks_per_row + b];
      // GGUF keeps element i < 16 in the low nibble of byte i and element i + 16 in its high one.
      const auto nibble = [&](int i) { return (q[i / 2] >> (4 * (i % 2))) & 0x0F; };
      for (int i = 0; i < 16; ++i)
        out.qs[i] = static_cast<uint8_t>(nibble(i) | (nibble(i + 16) << 4));
      std::memcpy(dst + (r * blocks_per_row + b) * sizeof(BlockMXFP4), &out, sizeof(out));
    }
  }
}

}  // namespace ts
