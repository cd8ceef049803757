#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/activations.h"
#include "backend/cpu/isa_target.h"

TS_ISA_BEGIN("avx2,fma,avx512f,avx512dq")

#include "backend/cpu/exp_avx512.h"

namespace ts::cpu {

// The tail takes the same vector arithmetic under a mask: an element's result then does not depend
// on where the runs split (threads, rows per call), which keeps expert streaming, whose activation
// runs one expert at a time, bit-identical to resident experts, whose activation runs once.
void swiglu_avx512(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

// GELU's tanh form as a logistic: 0.5 g (1 + tanh(u)) = g / (1 + e^(-2u)), u = sqrt(2 / pi) (g +
// 0.044715 g^3).
inline __m512 gelu_tanh512(__m512 g) {
  const __m512 inner =
      _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), g), _mm512_mul_ps(g, g), g);
  const __m512 e = exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0f * 0.7978845608028654f), inner));
  return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// The same masked tail as swiglu_avx512.
void geglu_avx512(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 gelu = gelu_tanh512(_mm512_maskz_loadu_ps(m, gate + i));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(gelu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void gelu_tanh_avx512(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, gelu_tanh512(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace ts::cpu

TS_ISA_END()
