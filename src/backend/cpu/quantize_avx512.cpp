// Activation quantisation for the 32-element block types on 512-bit vectors: the same values as
// quantize_row_q8a32 (largest magnitude on the float bits, d = amax / 127, half away from zero),
// two vectors per block. Prefill quantises every activation row once per matmul; the plain loop
// was a visible share of prefill time (docs/PERFORMANCE.md, "Measured choices").
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/activations.h"
#include "backend/cpu/isa_target.h"

TS_ISA_BEGIN("avx2,avx512f")

namespace ts::cpu {
namespace {

// x * id + (+-0.5), truncated: the two roundings of the scalar code, each as its own rounded
// operation (the _round forms are never contracted into a fused multiply-add).
__m512i round_half_away(__m512 x, __m512 id) {
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 v = _mm512_mul_round_ps(x, id, kNearest);
  const __mmask16 nonneg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GE_OQ);
  const __m512 half = _mm512_mask_blend_ps(nonneg, _mm512_set1_ps(-0.5f), _mm512_set1_ps(0.5f));
  return _mm512_cvttps_epi32(_mm512_add_round_ps(v, half, kNearest));
}

}  // namespace

void quantize_row_q8a32_avx512(const float* x, BlockQ8A32* y, int64_t n) {
  const __m512i abs_bits = _mm512_set1_epi32(0x7FFFFFFF);
  for (int64_t b = 0; b < n / kQK32; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * kQK32), x1 = _mm512_loadu_ps(x + b * kQK32 + 16);
    const __m512i a = _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(x0), abs_bits),
                                       _mm512_and_si512(_mm512_castps_si512(x1), abs_bits));
    const int32_t max_bits = _mm512_reduce_max_epi32(a);
    float amax;
    std::memcpy(&amax, &max_bits, sizeof(amax));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0 ? 1.0f / d : 0.0f);
    const __m512i q0 = round_half_away(x0, id), q1 = round_half_away(x1, id);
    BlockQ8A32& out = y[b];
    out.d = d;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.qs), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.qs + 16), _mm512_cvtepi32_epi8(q1));
    out.sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

}  // namespace ts::cpu

TS_ISA_END()
