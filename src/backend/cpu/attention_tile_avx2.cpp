// The attention tile kernel (attention_tile_body.h) on AVX2 + FMA: a 16-lane vector as two
// 256-bit halves, the polynomial exp of exp_avx2.h for the softmax: the path of CPUs without
// AVX-512. (Through the plain 16-float arrays that the generic path uses, the compiler's
// shuffles and libm's scalar expf made it ten times slower than the AVX-512 path.)

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

TS_ISA_BEGIN("avx2,fma,f16c")

#include "backend/cpu/attention_tile_body.h"
#include "backend/cpu/exp_avx2.h"

namespace ts::cpu {
namespace {

struct Avx2Lanes {
  struct F {
    __m256 lo, hi;  // lanes 0..7, 8..15
  };
  template <class Op>
  static F each(const F& a, const F& b, Op op) {
    return {op(a.lo, b.lo), op(a.hi, b.hi)};
  }
  static F zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static F load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void store(float* p, const F& x) {
    _mm256_storeu_ps(p, x.lo);
    _mm256_storeu_ps(p + 8, x.hi);
  }
  static F bcast(const float* p) {
    const __m256 v = _mm256_broadcast_ss(p);
    return {v, v};
  }
  static F fma(const F& a, const F& b, const F& c) {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  static F mul(const F& a, const F& b) {
    return each(a, b, [](__m256 x, __m256 y) { return _mm256_mul_ps(x, y); });
  }
  static F add(const F& a, const F& b) {
    return each(a, b, [](__m256 x, __m256 y) { return _mm256_add_ps(x, y); });
  }
  static F max(const F& a, const F& b) {
    return each(a, b, [](__m256 x, __m256 y) { return _mm256_max_ps(x, y); });
  }
  static F exp_shifted(const F& s, const F& ref) {
    return each(s, ref, [](__m256 x, __m256 r) {
      const __m256 seen = _mm256_cmp_ps(x, neg_inf(), _CMP_NEQ_OQ);
      return _mm256_and_ps(seen, exp256(_mm256_sub_ps(x, r)));
    });
  }
  static F finite_or_zero(const F& a) {
    return each(a, a, [](__m256 x, __m256) {
      return _mm256_and_ps(_mm256_cmp_ps(x, neg_inf(), _CMP_NEQ_OQ), x);
    });
  }
  static F mask_keys(const F& s, float j, const F& lo, const F& hi) {
    const __m256 jv = _mm256_set1_ps(j);
    const F in = each(lo, hi, [&](__m256 l, __m256 h) {
      return _mm256_and_ps(_mm256_cmp_ps(l, jv, _CMP_LE_OQ), _mm256_cmp_ps(jv, h, _CMP_LT_OQ));
    });
    return each(s, in, [](__m256 x, __m256 keep) { return _mm256_blendv_ps(neg_inf(), x, keep); });
  }
  static float hsum(const F& a) {
    const __m256 s = _mm256_add_ps(a.lo, a.hi);
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  // A kv head's slice of a cache row, f16 eight values a load inline (the generic conversion's
  // call per row showed in the profile); other types through the generic conversion.
  static void load_row(DType dtype, const uint8_t* src, float* dst, int64_t n) {
    if (dtype == DType::F16 && n % 8 == 0) {
      for (int64_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(
            dst + i,
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
    } else {
      load_kv_head(dtype, src, dst, n);
    }
  }
  static bool scores_few_queries(const QueryBlock&, const TileScratch&, int64_t) { return false; }
  static __m256 neg_inf() { return _mm256_set1_ps(-std::numeric_limits<float>::infinity()); }
};

}  // namespace

void attend_keys_avx2(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1, float softcap,
                      const LaneState& st, const TileScratch& ws) {
  attend_keys<Avx2Lanes>(b, kv, j0, j1, softcap, st, ws);
}

}  // namespace ts::cpu

TS_ISA_END()
