// The low-bit grid types decoded straight into KDot512's 512-bit chunk pairs (two 32-element
// sub-blocks a vector): the grid values as unsigned magnitudes and the signs as a 64-bit lane mask
// that the dot applies to the activations, where matmul_lowbit_x86_body.h's 256-bit decoders
// spread every sign bit into a byte and negate the weights. Decoding is what a low-bit row's dot
// costs (a token's matmuls run far below the read bound), so its instruction count is the speed.
// For one activation row (a token's decode) each pair is dotted as it is decoded, in registers.
// Include it inside an AVX512-VNNI (and BMI2) target pragma.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/matmul_lowbit_x86_body.h"
#include "backend/cpu/matmul_vnni_ops.h"
#include "backend/cpu/matmul_x86_body.h"
#include "quant/blocks.h"
#include "quant/iq_grids.h"

namespace ts::cpu {
namespace {

// Eight 8-value grid entries as one 64-byte vector, entry i[j] in bytes 8 j .. 8 j + 7 (scalar
// loads: a 512-bit gather measured slower).
inline __m512i grid8x8(const uint64_t* grid, const uint32_t (&i)[8]) {
  return _mm512_set_epi64(static_cast<int64_t>(grid[i[7]]), static_cast<int64_t>(grid[i[6]]),
                          static_cast<int64_t>(grid[i[5]]), static_cast<int64_t>(grid[i[4]]),
                          static_cast<int64_t>(grid[i[3]]), static_cast<int64_t>(grid[i[2]]),
                          static_cast<int64_t>(grid[i[1]]), static_cast<int64_t>(grid[i[0]]));
}

// Pair p's int16 scale vector from eight 32-bit lanes that each hold chunk c's scale in both
// halves: lane 2 p in its low 256 bits, lane 2 p + 1 in its high.
inline __m512i pair_scale(__m256i scale32, int p) {
  return _mm512_permutexvar_epi32(
      _mm512_inserti64x4(_mm512_set1_epi32(2 * p), _mm256_set1_epi32(2 * p + 1), 1),
      _mm512_castsi256_si512(scale32));
}

// Sixteen 4-value grid entries as one 64-byte vector, entry i[j] in bytes 4 j .. 4 j + 3.
inline __m512i grid4x16(const uint32_t* grid, const uint32_t (&i)[16]) {
  return _mm512_set_epi32(
      static_cast<int>(grid[i[15]]), static_cast<int>(grid[i[14]]), static_cast<int>(grid[i[13]]),
      static_cast<int>(grid[i[12]]), static_cast<int>(grid[i[11]]), static_cast<int>(grid[i[10]]),
      static_cast<int>(grid[i[9]]), static_cast<int>(grid[i[8]]), static_cast<int>(grid[i[7]]),
      static_cast<int>(grid[i[6]]), static_cast<int>(grid[i[5]]), static_cast<int>(grid[i[4]]),
      static_cast<int>(grid[i[3]]), static_cast<int>(grid[i[2]]), static_cast<int>(grid[i[1]]),
      static_cast<int>(grid[i[0]]));
}

// Pair p's int16 scale vector from the sixteen int16 scales of 16-element sub-blocks: the
// maddubs lane l of the pair sums values 2 l and 2 l + 1, of sub-block 4 p + l / 8.
inline __m512i pair_scale16(__m256i scale16, int p) {
  const __m512i lane_sub_block =
      _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002,
                       0x0002000200020002, 0x0001000100010001, 0x0001000100010001, 0, 0);
  return _mm512_permutexvar_epi16(_mm512_add_epi16(lane_sub_block, _mm512_set1_epi16(4 * p)),
                                  _mm512_castsi256_si512(scale16));
}

// The eight u64 sign masks of a block, pair p's in words[p] (four per 256-bit vector).
inline void store_masks(__m256i signs, uint64_t (&words)[4]) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(words), signs);
}

// Four grid indices of more than eight bits: index j is byte low[j], with the bits of `high`
// that `spread` places at bits 16 j + 8 and up (BMI2's bit deposit: a few instructions for the
// four, where shifting and masking each index took several).
inline void four_indices(const uint8_t* low, uint32_t high, uint64_t spread, uint32_t* out) {
  const uint64_t four = _pdep_u64(load_u32(low), 0x00FF00FF00FF00FF) | _pdep_u64(high, spread);
  for (int j = 0; j < 4; ++j) out[j] = static_cast<uint16_t>(four >> 16 * j);
}

// One decoded chunk pair: magnitudes, the lanes whose value is negative, the int16 scales.
struct GridPair {
  __m512i u;
  __mmask64 negative;
  __m512i scale;
};

// iq2_xxs: sub-block c is two u32, four grid indices (bytes) and aux (four 7-bit sign indices,
// the scale in bits 28..31).
struct PairsIQ2_XXS {
  using Block = BlockIQ2_XXS;
  template <class Visit>
  __attribute__((always_inline)) static float pairs(const Block& b, Visit&& visit) {
    const __m512i q = _mm512_loadu_si512(b.qs);
    const __m256i aux = _mm512_cvtepi64_epi32(_mm512_srli_epi64(q, 32));  // the u64s' high halves
    uint64_t signs[4];
    store_masks(iq_sign_words(aux), signs);
    const __m256i scales = odd_scales_x2(_mm256_srli_epi32(aux, 28));
    const auto* idx = reinterpret_cast<const uint8_t*>(b.qs);
    for (int p = 0; p < 4; ++p) {
      const uint8_t* a = idx + 16 * p;
      const uint32_t i[8] = {a[0], a[1], a[2], a[3], a[8], a[9], a[10], a[11]};
      visit(p, GridPair{grid8x8(kIq2xxsGrid, i), _cvtu64_mask64(signs[p]), pair_scale(scales, p)});
    }
    return _cvtsh_ss(b.d) * 0.125f;
  }
};

// iq2_xs: group g's u16 is its grid index (low 9 bits) and sign index (top 7); sixteen 4-bit
// scales of 16 elements.
struct PairsIQ2_XS {
  using Block = BlockIQ2_XS;
  template <class Visit>
  __attribute__((always_inline)) static float pairs(const Block& b, Visit&& visit) {
    // The 32 sign indices as bytes in group order (packus interleaves 128-bit lanes).
    const __m256i q0 = load256(b.qs), q1 = load256(b.qs + 16);
    const __m256i index = _mm256_permute4x64_epi64(
        _mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9)), 0xD8);
    uint64_t signs[4];
    store_masks(iq_sign_bytes(index), signs);
    const __m256i scales = iq2_nibble_scales(b.scales);
    for (int p = 0; p < 4; ++p) {
      const uint16_t* g = b.qs + 8 * p;
      uint32_t i[8];
      for (int j = 0; j < 8; ++j) i[j] = g[j] & 511;
      visit(p, GridPair{grid8x8(kIq2xsGrid, i), _cvtu64_mask64(signs[p]), pair_scale16(scales, p)});
    }
    return _cvtsh_ss(b.d) * 0.125f;
  }
};

// iq2_s: group g's index is qs[g] with two high bits from qh[g / 4], its signs the byte
// qs[32 + g]; scales as iq2_xs.
struct PairsIQ2_S {
  using Block = BlockIQ2_S;
  template <class Visit>
  __attribute__((always_inline)) static float pairs(const Block& b, Visit&& visit) {
    const __m256i scales = iq2_nibble_scales(b.scales);
    for (int p = 0; p < 4; ++p) {
      uint32_t i[8];
      four_indices(b.qs + 8 * p, b.qh[2 * p], 0x0300030003000300, i);
      four_indices(b.qs + 8 * p + 4, b.qh[2 * p + 1], 0x0300030003000300, i + 4);
      uint64_t signs;
      std::memcpy(&signs, b.qs + kQKK / 8 + 8 * p, sizeof signs);
      visit(p, GridPair{grid8x8(kIq2sGrid, i), _cvtu64_mask64(signs), pair_scale16(scales, p)});
    }
    return _cvtsh_ss(b.d) * 0.125f;
  }
};

// The four pairs' sign masks and the sub-block scales (as pair_scale takes them) of an iq3_xxs
// block, from its eight u32 after the grid indices.
inline __m256i iq3xxs_signs_scales(const BlockIQ3_XXS& b, uint64_t (&signs)[4]) {
  const __m256i aux = load256(b.qs + kQKK / 4);
  store_masks(iq_sign_words(aux), signs);
  return odd_scales_x2(_mm256_srli_epi32(aux, 28));
}

// iq3_xxs: 64 4-value grid indices (bytes), then a u32 per sub-block: four 7-bit sign indices
// and the scale in bits 28..31.
struct PairsIQ3_XXS {
  using Block = BlockIQ3_XXS;
  template <class Visit>
  __attribute__((always_inline)) static float pairs(const Block& b, Visit&& visit) {
    uint64_t signs[4];
    const __m256i scales = iq3xxs_signs_scales(b, signs);
    for (int p = 0; p < 4; ++p) {
      const uint8_t* q = b.qs + 16 * p;
      uint32_t i[16];
      for (int j = 0; j < 16; ++j) i[j] = q[j];
      visit(p, GridPair{grid4x16(kIq3xxsGrid, i), _cvtu64_mask64(signs[p]), pair_scale(scales, p)});
    }
    return _cvtsh_ss(b.d) * 0.25f;
  }
};

// iq3_s: 64 4-value grid indices, qs[i] with a ninth bit from qh[i / 8]; the signs as bits; eight
// 4-bit scales of 32 elements (1 + 2 s).
struct PairsIQ3_S {
  using Block = BlockIQ3_S;
  template <class Visit>
  __attribute__((always_inline)) static float pairs(const Block& b, Visit&& visit) {
    // Scale c is nibble c % 2 of scales[c / 2].
    const __m256i s4 = _mm256_set1_epi32(static_cast<int>(load_u32(b.scales)));
    const __m256i scales = odd_scales_x2(
        _mm256_and_si256(_mm256_srlv_epi32(s4, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                         _mm256_set1_epi32(0x0F)));
    for (int p = 0; p < 4; ++p) {
      uint32_t i[16];
      for (int k = 0; k < 4; ++k)  // index 4 k + j of the pair: bit 4 (k % 2) + j of its qh byte
        four_indices(b.qs + 16 * p + 4 * k, b.qh[2 * p + k / 2] >> 4 * (k % 2), 0x0100010001000100,
                     i + 4 * k);
      uint64_t signs;
      std::memcpy(&signs, b.signs + 8 * p, sizeof signs);
      visit(p, GridPair{grid4x16(kIq3sGrid, i), _cvtu64_mask64(signs), pair_scale(scales, p)});
    }
    return _cvtsh_ss(b.d);
  }
};

// iq1_s: signed values 8 grid + delta (grid -1, 0, 1; delta +-1 per sub-block), dotted as their
// magnitudes with the activations' signs flipped where negative.
struct PairsIQ1_S {
  using Block = BlockIQ1_S;
  template <class Visit>
  __attribute__((always_inline)) static float pairs(const Block& b, Visit&& visit) {
    const __m256i qh32 =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)));
    const __m256i scales =
        odd_scales_x2(_mm256_and_si256(_mm256_srli_epi32(qh32, 12), _mm256_set1_epi32(7)));
    for (int p = 0; p < 4; ++p) {
      uint32_t i[8];
      four_indices(b.qs + 8 * p, b.qh[2 * p], 0x0700070007000700, i);
      four_indices(b.qs + 8 * p + 4, b.qh[2 * p + 1], 0x0700070007000700, i + 4);
      // The delta: -1 in the 32 lanes of a sub-block whose bit 15 is set, else +1.
      const uint32_t h0 = b.qh[2 * p], h1 = b.qh[2 * p + 1];
      const __mmask64 minus =
          _cvtu64_mask64((h0 >> 15 ? 0xFFFFFFFFull : 0) | (h1 >> 15 ? 0xFFFFFFFF00000000ull : 0));
      // 8 grid: each byte shifted left by 3 (a 16-bit shift, less what crossed into the next byte).
      const __m512i grid8 =
          _mm512_and_si512(_mm512_slli_epi16(grid8x8(kIq1sGrid, i), 3), _mm512_set1_epi8(-8));
      const __m512i v = _mm512_add_epi8(
          grid8, _mm512_mask_blend_epi8(minus, _mm512_set1_epi8(1), _mm512_set1_epi8(-1)));
      visit(p, GridPair{_mm512_abs_epi8(v), _mm512_movepi8_mask(v), pair_scale(scales, p)});
    }
    return _cvtsh_ss(b.d) * 0.125f;
  }
};

// iq1_m: as iq1_s, with group g's index high bits and delta sign in nibble g % 2 of qh[g / 2]
// (bits 0..2, bit 3) and sixteen scales of 16 elements.
struct PairsIQ1_M {
  using Block = BlockIQ1_M;
  template <class Visit>
  __attribute__((always_inline)) static float pairs(const Block& b, Visit&& visit) {
    __m256i scales;
    const float d = iq1m_scales(b, scales);
    for (int p = 0; p < 4; ++p) {
      const uint32_t h = load_u32(b.qh + 4 * p);  // the nibbles of the pair's eight groups
      uint32_t i[8];
      four_indices(b.qs + 8 * p, _pext_u32(h, 0x7777), 0x0700070007000700, i);
      four_indices(b.qs + 8 * p + 4, _pext_u32(h >> 16, 0x7777), 0x0700070007000700, i + 4);
      // The delta: -1 in the 8 lanes of a group whose nibble has bit 3 set, else +1.
      const __mmask64 minus =
          _cvtu64_mask64(_pdep_u64(_pext_u32(h, 0x88888888), 0x0101010101010101) * 0xFF);
      const __m512i grid8 =
          _mm512_and_si512(_mm512_slli_epi16(grid8x8(kIq1sGrid, i), 3), _mm512_set1_epi8(-8));
      const __m512i v = _mm512_add_epi8(
          grid8, _mm512_mask_blend_epi8(minus, _mm512_set1_epi8(1), _mm512_set1_epi8(-1)));
      visit(p, GridPair{_mm512_abs_epi8(v), _mm512_movepi8_mask(v), pair_scale16(scales, p)});
    }
    return d;
  }
};

// KKernel's decoder of a pair-decoded type: its chunks for the prompt kernels, and a fused
// decode-and-dot for one activation row.
template <class Pairs>
struct Grid512 {
  using Block = typename Pairs::Block;
  static constexpr bool kMin = false, kSigned = true;
  static constexpr int kOffsetShift = -1;
  static void decode(const Block& b, KDecoded& k, KDot512::Chunks& ch) {
    k.d = Pairs::pairs(b, [&](int p, const GridPair& g) {
      ch.u[p] = g.u, ch.negative[p] = g.negative, ch.scale[p] = g.scale;
    });
    k.dmin = 0;
  }
  // The block's scaled dot with activations xq as eight int32 lanes; *d its float factor.
  __attribute__((always_inline)) static __m256i dot(const Block& b, const int8_t* xq, float* d) {
    __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    *d = Pairs::pairs(b, [&](int p, const GridPair& g) {
      const __m512i x = _mm512_loadu_si512(xq + 64 * p);
      const __m512i signed_x = _mm512_mask_sub_epi8(x, g.negative, _mm512_setzero_si512(), x);
      acc[p % 2] = _mm512_dpwssd_epi32(acc[p % 2], _mm512_maddubs_epi16(g.u, signed_x), g.scale);
    });
    const __m512i sum = _mm512_add_epi32(acc[0], acc[1]);
    return _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
  }
};

}  // namespace
}  // namespace ts::cpu
