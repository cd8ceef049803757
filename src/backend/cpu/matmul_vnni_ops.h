// The AVX512-VNNI integer operations of the k-quant kernels (matmul_x86_body.h's Ops): vpdpbusd for
// the plain u8 x s8 dots and vpdpwssd to apply the int16 sub-block scales, the chunk dots two
// chunks a 512-bit instruction. Include it inside an AVX512-VNNI target pragma, after
// matmul_x86_body.h (the units that instantiate the kernels: matmul_kernels_avx512vnni.cpp, and
// matmul_lowbit_avx512vbmi.cpp for the VBMI decoders).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/matmul_x86_body.h"

namespace ts::cpu {
namespace {

// The k-quant chunk dots two chunks (64 codes) per 512-bit instruction: the prefill kernels are
// bound by these dots, and the 512-bit forms do twice the work per instruction.
struct KDot512 {
  // Weight rows a prompt decodes together (KKernel::chunk): each activation block is then loaded
  // once for 4 rows (faster than 2, and 8 slower: docs/PERFORMANCE.md, "Measured choices").
  static constexpr int kChunkRows = 4;
  struct Chunks {
    __m512i u[4];
    __m512i scale[4];
    __mmask64 negative[4];  // signed values (kSigned): the lanes whose activation is negated
  };
  static __m512i pair(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
  // Signed values are dotted as |value| times the activation with the value's sign.
  template <bool kSigned>
  static void prepare(const KDecoded& k, Chunks& ch) {
    __m256i scales[8];
    chunk_scales(k.scale16, scales);
    for (int p = 0; p < 4; ++p) {
      ch.u[p] = pair(k.u[2 * p], k.u[2 * p + 1]);
      ch.scale[p] = pair(scales[2 * p], scales[2 * p + 1]);
      if constexpr (kSigned) {
        ch.negative[p] = _mm512_movepi8_mask(ch.u[p]);
        ch.u[p] = _mm512_abs_epi8(ch.u[p]);
      }
    }
  }
  template <bool kSigned>
  static __m512i activations(const Chunks& ch, const int8_t* xq, int p) {
    const __m512i x = _mm512_loadu_si512(xq + 64 * p);
    if constexpr (kSigned)
      return _mm512_mask_sub_epi8(x, ch.negative[p], _mm512_setzero_si512(), x);
    return x;
  }
  template <bool kSigned>
  static __m256i dot(const KDecoded&, const Chunks& ch, const int8_t* xq) {
    __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
    for (int p = 0; p < 4; p += 2) {
      const __m512i x0 = activations<kSigned>(ch, xq, p), x1 = activations<kSigned>(ch, xq, p + 1);
      even = _mm512_dpwssd_epi32(even, _mm512_maddubs_epi16(ch.u[p], x0), ch.scale[p]);
      odd = _mm512_dpwssd_epi32(odd, _mm512_maddubs_epi16(ch.u[p + 1], x1), ch.scale[p + 1]);
    }
    const __m512i sum = _mm512_add_epi32(even, odd);
    return _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
  }
};

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
  using KDot = KDot512;
};

}  // namespace
}  // namespace ts::cpu
