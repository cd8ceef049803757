// AVX-512 VNNI integer matmul kernels (see matmul_x86_body.h): vpdpbusd for the plain u8 x s8
// dots and vpdpwssd to apply the int16 sub-block scales, on 256-bit vectors (AVX512-VL).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"

#if defined(__clang__)
#pragma clang attribute push(                                                      \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif

#include "backend/cpu/matmul_x86_body.h"

namespace ts::cpu {
namespace {

struct VnniOps {
  // vpdpbusd sums the u8 x s8 products in int32: any unsigned code.
  static constexpr bool kWideDot = true;
  // Byte i = 0x10 where bit i of the mask is set.
  static __m256i fifth_bits32(const uint8_t* qh) {
    return _mm256_maskz_mov_epi8(load_u32(qh), bytes(0x10));
  }
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m256i dot_scaled(__m256i acc, __m256i u, __m256i s, __m256i scale16) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), scale16);
  }
};

}  // namespace

RowsKernel avx512vnni_int_kernel(DType t) {
  return x86_int_kernel<VnniOps>(t);
}

}  // namespace ts::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
