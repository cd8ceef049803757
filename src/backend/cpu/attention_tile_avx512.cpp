// The attention tile kernel (attention_tile_body.h) on 512-bit vectors: FMA for the two matrix
// products, the polynomial exp of exp_avx512.h for the softmax.

// The standard headers the kernel uses come first: an inline library function compiled inside
// the target region below could be picked by the linker for code that runs on any CPU.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cpu/attention_tile.h"
#include "backend/cpu/isa_target.h"

TS_ISA_BEGIN("avx2,fma,f16c,avx512f")

#include "backend/cpu/attention_tile_body.h"
#include "backend/cpu/exp_avx512.h"

namespace ts::cpu {
namespace {

struct Avx512Lanes {
  using F = __m512;
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, __m512 x) { _mm512_storeu_ps(p, x); }
  static __m512 bcast(const float* p) { return _mm512_set1_ps(*p); }
  static __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
  static __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
  static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512 max(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
  static __m512 exp_shifted(__m512 s, __m512 ref) {
    const __mmask16 seen = _mm512_cmp_ps_mask(s, neg_inf(), _CMP_NEQ_OQ);
    return _mm512_maskz_mov_ps(seen, exp512(_mm512_sub_ps(s, ref)));
  }
  static __m512 finite_or_zero(__m512 x) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, neg_inf(), _CMP_NEQ_OQ), x);
  }
  static __m512 mask_keys(__m512 s, float j, __m512 lo, __m512 hi) {
    const __m512 jv = _mm512_set1_ps(j);
    const __mmask16 in =
        _mm512_cmp_ps_mask(lo, jv, _CMP_LE_OQ) & _mm512_cmp_ps_mask(jv, hi, _CMP_LT_OQ);
    return _mm512_mask_mov_ps(neg_inf(), in, s);
  }
  static float hsum(__m512 x) { return _mm512_reduce_add_ps(x); }
  static __m512 neg_inf() { return _mm512_set1_ps(-std::numeric_limits<float>::infinity()); }
};

}  // namespace

void attend_keys_avx512(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1,
                        float softcap, const LaneState& st, const TileScratch& ws) {
  attend_keys<Avx512Lanes>(b, kv, j0, j1, softcap, st, ws);
}

}  // namespace ts::cpu

TS_ISA_END()
