// gpt-oss's MXFP4 checkpoints store each row as planes (16 bytes of nibble pairs per block of 32,
// then a separate array of e8m0 scales); GGUF's MXFP4 blocks hold the scale beside its nibbles.
#pragma once

#include <cstdint>

namespace ts {

// Rows of gpt-oss's MXFP4 checkpoints into GGUF MXFP4 blocks: `rows` rows of `blocks_per_row`
// blocks, row r taken from source row first + r * step of `planes` ([rows][blocks][16] bytes,
// element 2i in the low nibble of byte i, 2i + 1 in the high) and of `scales` ([rows][blocks]).
void mxfp4_planes_to_blocks(const uint8_t* planes, const uint8_t* scales, int64_t rows,
                            int64_t blocks_per_row, int64_t first, int64_t step, uint8_t* dst);

}  // namespace ts
