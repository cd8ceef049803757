// AVX-512 (F/BW/VL) float matmul kernels (see matmul_x86_body.h): 512-bit FMA over f32 weights
// and over f16 / bf16 weights widened to f32 on the fly.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"

TS_ISA_BEGIN("avx2,fma,f16c,avx512f,avx512bw,avx512vl")

#include "backend/cpu/matmul_x86_body.h"

namespace ts::cpu {
namespace {

struct Avx512FloatOps {
  using VecF = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kFloatChains = 2;   // accumulators per output (FloatKernel)
  static constexpr int kFloatRowTile = 3;  // weight rows of a prompt tile (float_rows_driver)
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512 load(F32Row w, int64_t k) { return _mm512_loadu_ps(w.p + k); }
  static __m512 load(F16Row w, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.p + k)));
  }
  static __m512 load(Bf16Row w, int64_t k) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.p + k));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load_x(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
  static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace

RowsKernel avx512_float_kernel(DType t) {
  return x86_float_kernel<Avx512FloatOps>(t);
}

}  // namespace ts::cpu

TS_ISA_END()
