// Reference dequantisation of every block format, written from the GGML block layouts, scalar and
// obviously correct: the kernels are tested against it, and it against the gguf package's numpy
// dequantisers (frozen vectors in tests/fixtures/quant).
#pragma once

#include <cstdint>

#include "quant/dtype.h"

namespace ts {

// Writes n floats from `src` (n must be a whole number of blocks of `t`).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);  // round to nearest even

}  // namespace ts
