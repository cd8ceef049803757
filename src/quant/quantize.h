// Quantisation of activations for the integer-dot matmul kernels: symmetric int8 per block with
// an f32 scale, so that |x - d * q| <= d / 2 with d = max|x| / 127 over the block.
#pragma once

#include <cstdint>

#include "quant/blocks.h"
#include "quant/dtype.h"

namespace ts {

// n must be a multiple of 32.
void quantize_row_q8a32(const float* x, BlockQ8A32* y, int64_t n);
// n must be a multiple of 256.
void quantize_row_q8k(const float* x, BlockQ8K* y, int64_t n);

// Quantisation of weights into the file formats (to write model files, e.g. synthetic models):
// round to nearest with each block's scales from its own range, no importance weighting; the float
// types round to nearest even. Every type the matmul kernels take can be produced, except the
// low-bit types (is_lowbit_dtype), whose quantisers are not written.
bool can_quantize_weights(DType t);
// Writes n / block_elems blocks of `t` to dst; n must be a whole number of blocks.
void quantize_row_weights(DType t, const float* x, void* dst, int64_t n);

}  // namespace ts
