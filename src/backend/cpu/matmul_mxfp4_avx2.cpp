// MXFP4 weights against f32 activations on AVX2 + FMA: each 32-element block decoded to four
// vectors (a lane permute of the eight e2m1 magnitudes, the sign from the code's top bit, times
// half the e8m0 scale: exact), then FMA against every activation row.
#include <immintrin.h>

#include <vector>

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

void decode_row(const BlockMXFP4* blocks, int64_t n_blocks, float* out) {
  const __m256 magnitudes = _mm256_setr_ps(0, 1, 2, 3, 4, 6, 8, 12);
  const __m256i low = _mm256_set1_epi32(0x0F);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256 d = _mm256_set1_ps(mxfp4_half_scale(blocks[b].e));
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].qs));
    const __m256i q0 = _mm256_cvtepu8_epi32(qs);                     // bytes 0..7
    const __m256i q1 = _mm256_cvtepu8_epi32(_mm_srli_si128(qs, 8));  // bytes 8..15
    float* o = out + b * kQK32;
    _mm256_storeu_ps(o, _mm256_mul_ps(d, decode8(_mm256_and_si256(q0, low), magnitudes)));
    _mm256_storeu_ps(o + 8, _mm256_mul_ps(d, decode8(_mm256_and_si256(q1, low), magnitudes)));
    _mm256_storeu_ps(o + 16, _mm256_mul_ps(d, decode8(_mm256_srli_epi32(q0, 4), magnitudes)));
    _mm256_storeu_ps(o + 24, _mm256_mul_ps(d, decode8(_mm256_srli_epi32(q1, 4), magnitudes)));
  }
}

float dot(const float* w, const float* x, int64_t K) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), _mm256_loadu_ps(x + k), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + k + 8), _mm256_loadu_ps(x + k + 8), a1);
  }
  // K is a whole number of 32-element blocks: nothing is left.
  const __m256 s = _mm256_add_ps(a0, a1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

void rows_mxfp4_avx2(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                     int64_t ldy) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = r0; r < r1; ++r) {
    decode_row(reinterpret_cast<const BlockMXFP4*>(w.data + r * w.row_stride), w.cols / kQK32,
               row.data());
    for (int64_t m = 0; m < x.M; ++m) y[m * ldy + r] = dot(row.data(), x.f32 + m * x.K, x.K);
  }
}

}  // namespace

RowsKernel mxfp4_kernel_avx2() {
  return rows_mxfp4_avx2;
}

}  // namespace ts::cpu

TS_ISA_END()
