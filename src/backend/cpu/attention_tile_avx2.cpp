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
    return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
  }
  static F add(const F& a, const F& b) {
    return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
  }
  static F max(const F& a, const F& b) {
    return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)};
  }
  static F exp_shifted(const F& s, const F& ref) {
    return {exp_shifted_half(s.lo, ref.lo), exp_shifted_half(s.hi, ref.hi)};
  }
  static F finite_or_zero(const F& a) { return {finite_half(a.lo), finite_half(a.hi)}; }
  static F mask_keys(const F& s, float j, const F& lo, const F& hi) {
    const __m256 jv = _mm256_set1_ps(j);
    return {_mm256_blendv_ps(neg_inf(), s.lo, in_range(jv, lo.lo, hi.lo)),
            _mm256_blendv_ps(neg_inf(), s.hi, in_range(jv, lo.hi, hi.hi))};
  }
  static float hsum(const F& a) {
    const __m256 s = _mm256_add_ps(a.lo, a.hi);
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  // A kv head's slice of a cache row, inline: f16 and bf16 eight values a load, q8_0 a block at
  // a time (the generic conversions' calls, and the q8_0 and bf16 ones' scalar loops, showed in
  // the profile); the same values (q8_0: code x scale, one rounding).
  static void load_row(DType dtype, const uint8_t* src, float* dst, int64_t n) {
    if (dtype == DType::F16 && n % 8 == 0) {
      for (int64_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(
            dst + i,
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
    } else if (dtype == DType::BF16 && n % 8 == 0) {
      for (int64_t i = 0; i < n; i += 8) {
        const __m256i wide =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
      }
    } else if (dtype == DType::Q8_0 && n % kQ8Block == 0) {
      for (int64_t i = 0; i < n; i += kQ8Block) {
        const uint8_t* block = src + i / kQ8Block * kQ8BlockBytes;
        uint16_t scale;
        std::memcpy(&scale, block, sizeof(scale));
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(scale));
        for (int64_t e = 0; e < kQ8Block; e += 8) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + e));
          _mm256_storeu_ps(dst + i + e,
                           _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
      }
    } else {
      load_kv_head(dtype, src, dst, n);
    }
  }
  static bool scores_few_queries(const QueryBlock&, const TileScratch&, int64_t) { return false; }
  static __m256 neg_inf() { return _mm256_set1_ps(-std::numeric_limits<float>::infinity()); }
  // Eight lanes of exp_shifted, finite_or_zero and mask_keys' lo <= j < hi (all bits set where
  // true). Static members rather than lambdas, for which GCC warned that their by-value vectors
  // change the ABI without AVX enabled (-Wpsabi).
  static __m256 exp_shifted_half(__m256 s, __m256 ref) {
    return _mm256_and_ps(_mm256_cmp_ps(s, neg_inf(), _CMP_NEQ_OQ), exp256(_mm256_sub_ps(s, ref)));
  }
  static __m256 finite_half(__m256 x) {
    return _mm256_and_ps(_mm256_cmp_ps(x, neg_inf(), _CMP_NEQ_OQ), x);
  }
  static __m256 in_range(__m256 j, __m256 lo, __m256 hi) {
    return _mm256_and_ps(_mm256_cmp_ps(lo, j, _CMP_LE_OQ), _mm256_cmp_ps(j, hi, _CMP_LT_OQ));
  }
};

}  // namespace

void attend_keys_avx2(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1, float softcap,
                      const LaneState& st, const TileScratch& ws) {
  attend_keys<Avx2Lanes>(b, kv, j0, j1, softcap, st, ws);
}

}  // namespace ts::cpu

TS_ISA_END()
