// Vectorised element-wise work on activations for the CPU backend.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace ts::cpu {

// out[i] = silu(gate[i]) * up[i] with 512-bit vectors; needs the AVX-512 path (active_isa()).
// exp is a degree-6 polynomial after range reduction, within 2 ulp of expf, and the division is
// exact, so the result differs from the scalar loop by a few ulp at most.
void swiglu_avx512(const float* gate, const float* up, int64_t n, float* out);
// out[i] = gelu_tanh(gate[i]) * up[i], the same way (GeGLU: Gemma's FFN).
void geglu_avx512(const float* gate, const float* up, int64_t n, float* out);
// out[i] = gelu_tanh(x[i]) (out may be x): the vision towers' and encoders' ungated MLP.
void gelu_tanh_avx512(const float* x, int64_t n, float* out);

// quantize_row_q8a32 (the same bytes) with 512-bit vectors; needs the AVX-512 path.
void quantize_row_q8a32_avx512(const float* x, BlockQ8A32* y, int64_t n);

}  // namespace ts::cpu
