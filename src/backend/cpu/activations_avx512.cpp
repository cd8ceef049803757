#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backend/cpu/activations.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512dq"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512dq")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "backend/cpu/exp_avx512.h"

namespace ts::cpu {

void swiglu_avx512(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace ts::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
