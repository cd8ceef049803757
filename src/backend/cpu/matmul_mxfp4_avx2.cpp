// MXFP4 weights against f32 activations on AVX2 + FMA: each 32-element block decoded to four
// vectors in registers (a lane permute of the eight e2m1 magnitudes, the sign from the code's top
// bit, times half the e8m0 scale: exact), then FMA against a tile of activation rows.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_mxfp4.h"
#include "quant/blocks.h"

TS_ISA_BEGIN("avx2,fma")

namespace ts::cpu {
namespace {

// Eight codes (low 4 bits of each lane) to their doubled e2m1 values.
inline __m256 decode8(__m256i codes, __m256 magnitudes) {
  const __m256 v = _mm256_permutevar8x32_ps(magnitudes, codes);
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(8)), 28);
  return _mm256_xor_ps(v, _mm256_castsi256_ps(sign));
}

// Up to kTile activation rows at a time: each block is decoded into registers once for them.
constexpr int64_t kTile = 4;

inline float hsum(__m256 s) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// Row r against activation rows [m0, m0 + T), T <= kTile, each with A accumulators (A = 4 for one
// row: a decode's FMA chain is then a quarter of a block long).
template <int64_t T, int A = T == 1 ? 4 : 2>
void row_tile(const BlockMXFP4* blocks, int64_t n_blocks, const float* x, int64_t K, float* y,
              int64_t ldy) {
  const __m256 magnitudes = _mm256_setr_ps(0, 1, 2, 3, 4, 6, 8, 12);
  const __m256i low = _mm256_set1_epi32(0x0F);
  __m256 acc[T][A];
  for (int64_t m = 0; m < T; ++m)
    for (int a = 0; a < A; ++a) acc[m][a] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256 d = _mm256_set1_ps(mxfp4_half_scale(blocks[b].e));
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].qs));
    const __m256i q0 = _mm256_cvtepu8_epi32(qs);                     // bytes 0..7
    const __m256i q1 = _mm256_cvtepu8_epi32(_mm_srli_si128(qs, 8));  // bytes 8..15
    const __m256 w[4] = {_mm256_mul_ps(d, decode8(_mm256_and_si256(q0, low), magnitudes)),
                         _mm256_mul_ps(d, decode8(_mm256_and_si256(q1, low), magnitudes)),
                         _mm256_mul_ps(d, decode8(_mm256_srli_epi32(q0, 4), magnitudes)),
                         _mm256_mul_ps(d, decode8(_mm256_srli_epi32(q1, 4), magnitudes))};
    for (int64_t m = 0; m < T; ++m) {
      const float* xb = x + m * K + b * kQK32;
      for (int v = 0; v < 4; ++v)
        acc[m][v % A] = _mm256_fmadd_ps(w[v], _mm256_loadu_ps(xb + 8 * v), acc[m][v % A]);
    }
  }
  for (int64_t m = 0; m < T; ++m) {
    __m256 s = acc[m][0];
    for (int a = 1; a < A; ++a) s = _mm256_add_ps(s, acc[m][a]);
    y[m * ldy] = hsum(s);
  }
}

void rows_mxfp4_avx2(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                     int64_t ldy) {
  const int64_t n_blocks = w.cols / kQK32;
  for (int64_t m0 = 0; m0 < x.M; m0 += kTile) {
    const int64_t T = std::min(kTile, x.M - m0);
    const float* xm = x.f32 + m0 * x.K;
    for (int64_t r = r0; r < r1; ++r) {
      const auto* blocks = reinterpret_cast<const BlockMXFP4*>(w.data + r * w.row_stride);
      float* yr = y + m0 * ldy + r;
      if (T == 4) row_tile<4>(blocks, n_blocks, xm, x.K, yr, ldy);
      if (T == 3) row_tile<3>(blocks, n_blocks, xm, x.K, yr, ldy);
      if (T == 2) row_tile<2>(blocks, n_blocks, xm, x.K, yr, ldy);
      if (T == 1) row_tile<1>(blocks, n_blocks, xm, x.K, yr, ldy);
    }
  }
}

}  // namespace

RowsKernel mxfp4_kernel_avx2() {
  return rows_mxfp4_avx2;
}

}  // namespace ts::cpu

TS_ISA_END()
