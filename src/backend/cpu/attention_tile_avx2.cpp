// The attention tile kernel (attention_tile_body.h) on AVX2 + FMA: a 16-lane vector as two
// 256-bit halves, the polynomial exp of exp_avx2.h for the softmax: the path of CPUs without
// AVX-512. (Through the plain 16-float arrays that the generic path uses, the compiler's
// shuffles and libm's scalar expf made it ten times slower than the AVX-512 path.)

// The standard headers the kernel uses come first: an inline library function compiled inside
// the target region below could be picked by the linker for code that runs on any CPU.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
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

// Decode scores of a block of exactly 4 query vectors (a decode row of GQA 4), the AVX2 form of
// attention_tile_avx512.cpp's interleaved scores: lane r * 4 + i of the 16 (two 256-bit halves,
// queries 0-1 and 2-3) holds query r against key i of a group of 4 consecutive keys, each lane
// the same FMA chain over d as the lane-per-query kernel, so the same bits as a prefill block.
constexpr int64_t kGroupKeys = 4;

// Four consecutive tile rows' dimensions [d0, d0 + 8), so that each dimension's four values lie
// together: out[(d - d0) * 4 + i] = k[i][d].
void mix_four_keys(const float* k, int64_t hdp, int64_t d0, float* out) {
  const __m256 a = _mm256_loadu_ps(k + d0), b = _mm256_loadu_ps(k + hdp + d0);
  const __m256 c = _mm256_loadu_ps(k + 2 * hdp + d0), e = _mm256_loadu_ps(k + 3 * hdp + d0);
  const __m256 ab_lo = _mm256_unpacklo_ps(a, b), ab_hi = _mm256_unpackhi_ps(a, b);
  const __m256 ce_lo = _mm256_unpacklo_ps(c, e), ce_hi = _mm256_unpackhi_ps(c, e);
  // Per 128-bit half: dimension d (d0 + 4 h + 0..3 across u0..u3) as a b c e.
  const __m256 u0 = _mm256_shuffle_ps(ab_lo, ce_lo, 0x44),
               u1 = _mm256_shuffle_ps(ab_lo, ce_lo, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(ab_hi, ce_hi, 0x44),
               u3 = _mm256_shuffle_ps(ab_hi, ce_hi, 0xEE);
  _mm256_storeu_ps(out, _mm256_permute2f128_ps(u0, u1, 0x20));
  _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
  _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
  _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
}

// Scores of N key groups from group g0 into s, key-major (a last group's keys past the tile's
// land in rows the tile does not read).
template <int N>
void score_four_query_groups(const QueryBlock& b, const TileScratch& ws, int64_t g0) {
  __m256 lo[N], hi[N];
  for (int c = 0; c < N; ++c) lo[c] = hi[c] = _mm256_setzero_ps();
  const float* k = ws.k_mixed + g0 * b.hdp * kGroupKeys;
  for (int64_t d = 0; d < b.hd; ++d) {
    const __m256 q01 = _mm256_loadu_ps(ws.q_mixed + d * kLanes);
    const __m256 q23 = _mm256_loadu_ps(ws.q_mixed + d * kLanes + 8);
    for (int c = 0; c < N; ++c) {
      const __m256 kb =
          _mm256_broadcast_ps(reinterpret_cast<const __m128*>(k + (c * b.hdp + d) * kGroupKeys));
      lo[c] = _mm256_fmadd_ps(kb, q01, lo[c]);
      hi[c] = _mm256_fmadd_ps(kb, q23, hi[c]);
    }
  }
  for (int c = 0; c < N; ++c) {
    // Rows r = 0..3 of (query, key) -> columns: key i's four queries.
    __m128 r0 = _mm256_castps256_ps128(lo[c]), r1 = _mm256_extractf128_ps(lo[c], 1);
    __m128 r2 = _mm256_castps256_ps128(hi[c]), r3 = _mm256_extractf128_ps(hi[c], 1);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    float* row = ws.s + (g0 + c) * kGroupKeys * b.Rp;
    _mm_storeu_ps(row, r0);
    _mm_storeu_ps(row + b.Rp, r1);
    _mm_storeu_ps(row + 2 * b.Rp, r2);
    _mm_storeu_ps(row + 3 * b.Rp, r3);
  }
}

void scores_four_queries(const QueryBlock& b, const TileScratch& ws, int64_t nk) {
  const __m256i spread01 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i spread23 = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  for (int64_t d = 0; d < b.hd; ++d) {
    const __m256 q = _mm256_castps128_ps256(_mm_loadu_ps(b.q + d * b.Rp));
    _mm256_storeu_ps(ws.q_mixed + d * kLanes, _mm256_permutevar8x32_ps(q, spread01));
    _mm256_storeu_ps(ws.q_mixed + d * kLanes + 8, _mm256_permutevar8x32_ps(q, spread23));
  }
  const int64_t groups = (nk + kGroupKeys - 1) / kGroupKeys;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t d0 = 0; d0 < b.hdp; d0 += 8)
      mix_four_keys(ws.k + g * kGroupKeys * b.hdp, b.hdp, d0,
                    ws.k_mixed + (g * b.hdp + d0) * kGroupKeys);
  // Four groups (eight sums) in flight cover the FMA latency.
  constexpr int kChains = 4;
  int64_t g = 0;
  for (; g + kChains <= groups; g += kChains) score_four_query_groups<kChains>(b, ws, g);
  for (; g < groups; ++g) score_four_query_groups<1>(b, ws, g);
}

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
    } else if (dtype == DType::Q8_0 && n % kQK32 == 0) {
      for (int64_t i = 0; i < n; i += kQK32) {
        const uint8_t* block = src + i / kQK32 * sizeof(BlockQ8_0);
        uint16_t scale;
        std::memcpy(&scale, block + offsetof(BlockQ8_0, d), sizeof(scale));
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(scale));
        for (int64_t e = 0; e < kQK32; e += 8) {
          const __m128i q = _mm_loadl_epi64(
              reinterpret_cast<const __m128i*>(block + offsetof(BlockQ8_0, qs) + e));
          _mm256_storeu_ps(dst + i + e,
                           _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
      }
    } else {
      load_kv_head(dtype, src, dst, n);
    }
  }
  static bool scores_few_queries(const QueryBlock& b, const TileScratch& ws, int64_t nk) {
    if (b.R != kGroupKeys) return false;
    scores_four_queries(b, ws, nk);
    return true;
  }
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
