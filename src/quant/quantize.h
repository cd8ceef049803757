// Quantisation of activations for the integer-dot matmul kernels: symmetric int8 per block with
// an f32 scale, so that |x - d * q| <= d / 2 with d = max|x| / 127 over the block.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace ts {

// n must be a multiple of 32.
void quantize_row_q8a32(const float* x, BlockQ8A32* y, int64_t n);
// n must be a multiple of 256.
void quantize_row_q8k(const float* x, BlockQ8K* y, int64_t n);

}  // namespace ts
