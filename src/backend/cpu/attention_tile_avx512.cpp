// The attention tile kernel (attention_tile_body.h) on 512-bit vectors: FMA for the two matrix
// products, the polynomial exp of exp_avx512.h for the softmax.

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

TS_ISA_BEGIN("avx2,fma,f16c,avx512f")

#include "backend/cpu/attention_tile_body.h"
#include "backend/cpu/exp_avx512.h"

namespace ts::cpu {
namespace {

// Index vectors of the interleaved scores of KPL keys a group, built once.
template <int KPL>
struct MixIndex {
  static constexpr int kQueries = kLanes / KPL;
  __m512i pair_lo, pair_hi;  // two rows' lanes 0..7 (8..15) interleaved: a0 b0 a1 b1 ...
  __m512i quad_lo, quad_hi;  // as 64-bit pairs: (ab0 ce0 ab1 ce1 ...) and (ab4 ce4 ...)
  __m512i spread;            // lane r * KPL + i <- query r (the queries spread over their keys)
  __m512i key_major;         // lane i * kQueries + r <- lane r * KPL + i (scores back as key rows)
  MixIndex() {
    alignas(64) int32_t lo[kLanes], hi[kLanes], sp[kLanes], km[kLanes];
    for (int64_t i = 0; i < kLanes; ++i) {
      const auto lane = static_cast<int32_t>(i);
      lo[i] = lane % 2 * 16 + lane / 2;
      hi[i] = lo[i] + 8;
      sp[i] = lane / KPL;
      km[i] = lane % kQueries * KPL + lane / kQueries;
    }
    pair_lo = _mm512_load_si512(lo);
    pair_hi = _mm512_load_si512(hi);
    spread = _mm512_load_si512(sp);
    key_major = _mm512_load_si512(km);
    quad_lo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    quad_hi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  }
};

// K of one group of KPL consecutive tile keys, dimensions [d0, d0 + 16), rearranged so that the
// group's KPL values of each dimension lie together: out[(d - d0) * KPL + i] = k[i][d].
template <int KPL>
void mix_keys(const MixIndex<KPL>& mx, const float* k, int64_t hdp, int64_t d0, float* out) {
  const __m512 a = _mm512_loadu_ps(k + d0), b = _mm512_loadu_ps(k + hdp + d0);
  const __m512 ab_lo = _mm512_permutex2var_ps(a, mx.pair_lo, b);
  const __m512 ab_hi = _mm512_permutex2var_ps(a, mx.pair_hi, b);
  if constexpr (KPL == 2) {
    _mm512_storeu_ps(out, ab_lo);
    _mm512_storeu_ps(out + kLanes, ab_hi);
  } else {
    static_assert(KPL == 4);
    const __m512 c = _mm512_loadu_ps(k + 2 * hdp + d0), e = _mm512_loadu_ps(k + 3 * hdp + d0);
    const __m512d ce_lo = _mm512_castps_pd(_mm512_permutex2var_ps(c, mx.pair_lo, e));
    const __m512d ce_hi = _mm512_castps_pd(_mm512_permutex2var_ps(c, mx.pair_hi, e));
    const __m512d lo = _mm512_castps_pd(ab_lo), hi = _mm512_castps_pd(ab_hi);
    _mm512_storeu_pd(out, _mm512_permutex2var_pd(lo, mx.quad_lo, ce_lo));
    _mm512_storeu_pd(out + kLanes, _mm512_permutex2var_pd(lo, mx.quad_hi, ce_lo));
    _mm512_storeu_pd(out + 2 * kLanes, _mm512_permutex2var_pd(hi, mx.quad_lo, ce_hi));
    _mm512_storeu_pd(out + 3 * kLanes, _mm512_permutex2var_pd(hi, mx.quad_hi, ce_hi));
  }
}

// The KPL values of one dimension of a key group, in every group of KPL lanes.
template <int KPL>
__m512 broadcast_group(const float* p) {
  if constexpr (KPL == 2) {
    double pair;
    std::memcpy(&pair, p, sizeof(pair));
    return _mm512_castpd_ps(_mm512_set1_pd(pair));
  } else {
    return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
  }
}

// Scores of N key groups from group g0, written key-major into s (the first 16 / KPL lanes of
// each key's row; the block's lanes past R are masked by the softmax). A last group's keys past
// the tile's land in rows the tile does not read.
template <int KPL, int N>
void score_groups(const MixIndex<KPL>& mx, const QueryBlock& b, const TileScratch& ws, int64_t g0) {
  constexpr int kQueries = MixIndex<KPL>::kQueries;
  __m512 acc[N];
  for (int c = 0; c < N; ++c) acc[c] = _mm512_setzero_ps();
  const float* k = ws.k_mixed + g0 * b.hdp * KPL;
  for (int64_t d = 0; d < b.hd; ++d) {
    const __m512 qv = _mm512_loadu_ps(ws.q_mixed + d * kLanes);
    for (int c = 0; c < N; ++c)
      acc[c] = _mm512_fmadd_ps(broadcast_group<KPL>(k + (c * b.hdp + d) * KPL), qv, acc[c]);
  }
  const auto row_mask = static_cast<__mmask16>((1u << kQueries) - 1);
  for (int c = 0; c < N; ++c) {
    const __m512 v = _mm512_permutexvar_ps(mx.key_major, acc[c]);
    const int64_t j = (g0 + c) * KPL;
    for (int64_t i = 0; i < KPL; ++i)
      _mm512_mask_storeu_ps(ws.s + (j + i) * b.Rp - i * kQueries,
                            static_cast<__mmask16>(row_mask << (i * kQueries)), v);
  }
}

// A tile's scores for a block of 4 to 8 query vectors (a decode row's GQA heads), every lane
// busy: lane r * KPL + i holds query r against key i of a group of KPL consecutive keys (KPL = 4
// for up to 4 queries, 2 for up to 8), where the lane-per-query kernel left 8 to 12 of 16 lanes
// idle. Each lane sums d = 0 .. hd - 1 from zero, one FMA a step, exactly score_keys' operations:
// a row's scores are the same bits here as in a prefill block.
template <int KPL>
void scores_mixed(const QueryBlock& b, const TileScratch& ws, int64_t nk) {
  static const MixIndex<KPL> mx;
  for (int64_t d = 0; d < b.hd; ++d)
    _mm512_storeu_ps(ws.q_mixed + d * kLanes,
                     _mm512_permutexvar_ps(mx.spread, _mm512_loadu_ps(b.q + d * b.Rp)));
  const int64_t groups = (nk + KPL - 1) / KPL;
  // The last group's keys past nk are tile rows the tile does not use (finite or not, their
  // scores go to rows it does not read); the tile has kTileKeys rows, a multiple of KPL.
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t d0 = 0; d0 < b.hdp; d0 += kLanes)
      mix_keys<KPL>(mx, ws.k + g * KPL * b.hdp, b.hdp, d0, ws.k_mixed + (g * b.hdp + d0) * KPL);
  // Eight independent sums in flight cover the FMA latency.
  constexpr int kChains = 8;
  int64_t g = 0;
  for (; g + kChains <= groups; g += kChains) score_groups<KPL, kChains>(mx, b, ws, g);
  for (; g < groups; ++g) score_groups<KPL, 1>(mx, b, ws, g);
}

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
  // A kv head's slice of a cache row, f16 and bf16 sixteen values at a time and q8_0 a block at
  // a time, inline (the generic conversions' calls and narrower loads took a quarter of a long
  // decode's attention time, the q8_0 dequantisation more); the same values (q8_0: code x
  // scale, one rounding).
  static void load_row(DType dtype, const uint8_t* src, float* dst, int64_t n) {
    if (dtype == DType::F16 && n % kLanes == 0) {
      for (int64_t i = 0; i < n; i += kLanes)
        _mm512_storeu_ps(
            dst + i,
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i))));
    } else if (dtype == DType::BF16 && n % kLanes == 0) {
      for (int64_t i = 0; i < n; i += kLanes) {
        const __m512i wide = _mm512_cvtepu16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
      }
    } else if (dtype == DType::Q8_0 && n % kQK32 == 0) {
      for (int64_t i = 0; i < n; i += kQK32) {
        const uint8_t* block = src + i / kQK32 * sizeof(BlockQ8_0);
        uint16_t scale;
        std::memcpy(&scale, block + offsetof(BlockQ8_0, d), sizeof(scale));
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(scale));
        for (int64_t h = 0; h < 2; ++h) {
          const __m128i q = _mm_loadu_si128(
              reinterpret_cast<const __m128i*>(block + offsetof(BlockQ8_0, qs) + 16 * h));
          _mm512_storeu_ps(dst + i + 16 * h,
                           _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d));
        }
      }
    } else {
      load_kv_head(dtype, src, dst, n);
    }
  }
  static bool scores_few_queries(const QueryBlock& b, const TileScratch& ws, int64_t nk) {
    if (b.R < kMinLaneQueries || b.R > kLanes / 2) return false;
    if (b.R <= kLanes / 4)
      scores_mixed<4>(b, ws, nk);
    else
      scores_mixed<2>(b, ws, nk);
    return true;
  }
  static __m512 neg_inf() { return _mm512_set1_ps(-std::numeric_limits<float>::infinity()); }
};

}  // namespace

void attend_keys_avx512(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1,
                        float softcap, const LaneState& st, const TileScratch& ws) {
  attend_keys<Avx512Lanes>(b, kv, j0, j1, softcap, st, ws);
}

}  // namespace ts::cpu

TS_ISA_END()
