// AVX2 + FMA + F16C matmul kernels (see matmul_x86_body.h): 256-bit float FMA, and u8 x s8
// dots through vpmaddubsw + vpmaddwd.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"
#include "quant/iq_grids.h"

TS_ISA_BEGIN("avx2,fma,f16c")

#include "backend/cpu/matmul_lowbit_x86_body.h"
#include "backend/cpu/matmul_x86_body.h"

namespace ts::cpu {
namespace {

struct Avx2Ops {
  using VecF = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kFloatChains = 1;   // accumulators per output (FloatKernel)
  static constexpr int kFloatRowTile = 2;  // weight rows of a prompt tile (float_rows_driver)
  static __m256 zero() { return _mm256_setzero_ps(); }
  static __m256 load(F32Row w, int64_t k) { return _mm256_loadu_ps(w.p + k); }
  static __m256 load(F16Row w, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.p + k)));
  }
  static __m256 load(Bf16Row w, int64_t k) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.p + k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static __m256 load_x(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
  static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static float hsum(__m256 v) { return hsum256(v); }

  // vpmaddubsw saturates pair sums at int16: unsigned codes must stay below 128.
  static constexpr bool kWideDot = false;
  static __m256i fifth_bits32(const uint8_t* qh) { return fifth_bits32_avx2(qh); }
  // acc += sums of four u8 x s8 products per int32 lane.
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  // acc += (pair sums of u8 x s8 products) x int16 scale, summed per int32 lane.
  static __m256i dot_scaled(__m256i acc, __m256i u, __m256i s, __m256i scale16) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16));
  }
  using KDot = KDot256<Avx2Ops>;
};

}  // namespace

RowsKernel avx2_kernel(DType t) {
  RowsKernel k = x86_float_kernel<Avx2Ops>(t);
  if (k == nullptr) k = x86_int_kernel<Avx2Ops>(t);
  return k != nullptr ? k : x86_lowbit_kernel<Avx2Ops>(t);
}

}  // namespace ts::cpu

TS_ISA_END()
