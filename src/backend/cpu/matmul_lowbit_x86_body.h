// The low-bit types (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, tq1_0, tq2_0) on the
// k-quant integer kernels of matmul_x86_body.h: each 256-element block decodes to signed int8
// values with int16 sub-block scales and one float factor, value = d * scale * q exactly, biased to
// unsigned codes (Biased), and KKernel or the k-quant GEMM dot them with the q8_K activations as
// they do q3_k's. Include it where matmul_x86_body.h is included, inside the same target pragma
// (see there).
//
// The integer forms: the i2 grids' d (0.5 + s) / 4 is d / 8 times 2 s + 1 (values 8, 25, 43);
// iq3_xxs's d (0.5 + s) / 2 is d / 4 times 2 s + 1 (values up to 62); iq3_s's d (1 + 2 s) takes
// the grid as it is; the i1 grids' d (2 s + 1) (grid +- 1/8) is d / 8 times 2 s + 1 times
// 8 grid +- 1; the ternary types are d times (code - 1).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/matmul_kernels_impl.h"
#include "backend/cpu/matmul_x86_body.h"
#include "quant/blocks.h"
#include "quant/iq_grids.h"

namespace ts::cpu {
namespace {

// For v whose 32-bit lanes are all one u32: its byte j (j < 4) in bytes 8 j .. 8 j + 7, one byte
// per group of 8 values spread over the group.
inline __m256i spread4(__m256i v) {
  return _mm256_shuffle_epi8(
      v, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
}

// v with the bytes negated where their sign bit is set in `signs` (byte i of the vector takes bit
// i % 8 of byte i / 8 of the little-endian u32, repeated in every 32-bit lane of `signs`).
inline __m256i apply_signs(__m256i v, __m256i signs) {
  const __m256i spread = spread4(signs);
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i negative = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_sub_epi8(_mm256_xor_si256(v, negative), negative);
}
inline __m256i apply_signs(__m256i v, uint32_t signs) {
  return apply_signs(v, _mm256_set1_epi32(static_cast<int>(signs)));
}

// 32-bit lane c of v in every lane.
inline __m256i lane(__m256i v, int c) {
  return _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(c));
}

// kIqSigns of 32 7-bit sign indices (bytes): the index with bit 7 set where it has an odd number
// of set bits (a nibble's parity by a byte shuffle).
inline __m256i iq_sign_bytes(__m256i index) {
  const __m256i parity16 = _mm256_setr_epi8(0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 1,
                                            0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0);
  const __m256i low4 = bytes(0x0F);
  const __m256i parity = _mm256_xor_si256(
      _mm256_shuffle_epi8(parity16, _mm256_and_si256(index, low4)),
      _mm256_shuffle_epi8(parity16, _mm256_and_si256(_mm256_srli_epi16(index, 4), low4)));
  return _mm256_or_si256(index, _mm256_slli_epi16(parity, 7));
}

// The sign bytes of eight u32 (one a lane) that hold four 7-bit sign indices at bits 0, 7, 14,
// 21: lane c holds the four kIqSigns bytes of u32 c.
inline __m256i iq_sign_words(__m256i packed) {
  const __m256i f7 = _mm256_set1_epi32(0x7F);
  const __m256i index = _mm256_or_si256(
      _mm256_or_si256(_mm256_and_si256(packed, f7),
                      _mm256_and_si256(_mm256_slli_epi32(packed, 1), _mm256_slli_epi32(f7, 8))),
      _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(packed, 2), _mm256_slli_epi32(f7, 16)),
                      _mm256_and_si256(_mm256_slli_epi32(packed, 3), _mm256_slli_epi32(f7, 24))));
  return iq_sign_bytes(index);
}

// Four 8-value grid entries as one 32-byte chunk.
inline __m256i grid8x4(const uint64_t* grid, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
  return _mm256_set_epi64x(static_cast<int64_t>(grid[i3]), static_cast<int64_t>(grid[i2]),
                           static_cast<int64_t>(grid[i1]), static_cast<int64_t>(grid[i0]));
}

// Eight 4-value grid entries as one 32-byte chunk.
inline __m256i grid4x8(const uint32_t* grid, const uint32_t (&i)[8]) {
  return _mm256_setr_epi32(static_cast<int>(grid[i[0]]), static_cast<int>(grid[i[1]]),
                           static_cast<int>(grid[i[2]]), static_cast<int>(grid[i[3]]),
                           static_cast<int>(grid[i[4]]), static_cast<int>(grid[i[5]]),
                           static_cast<int>(grid[i[6]]), static_cast<int>(grid[i[7]]));
}

// 2 s + 1 in both 16-bit halves of each 32-bit lane holding s (< 16): the scale vector of eight
// 32-element sub-blocks.
inline __m256i odd_scales_x2(__m256i s32) {
  const __m256i odd = _mm256_add_epi32(_mm256_slli_epi32(s32, 1), _mm256_set1_epi32(1));
  return _mm256_or_si256(odd, _mm256_slli_epi32(odd, 16));
}

// 2 s + 1 for the sixteen 4-bit scales s of iq2_xs / iq2_s (nibble j % 2 of scales[j / 2]).
inline __m256i iq2_nibble_scales(const uint8_t* scales) {
  const __m128i packed = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales));
  const __m128i low = _mm_and_si128(packed, _mm_set1_epi8(0x0F));
  const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F));
  const __m256i s = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(low, high));
  return _mm256_add_epi16(_mm256_slli_epi16(s, 1), _mm256_set1_epi16(1));
}

struct DecIQ2_XXS {
  using Block = BlockIQ2_XXS;
  static void decode(const Block& b, KDecoded& k) {
    const auto* bytes8 = reinterpret_cast<const uint8_t*>(b.qs);
    // Sub-block c is two u32, the grid indices and aux: aux's bits 0..27 are four sign indices,
    // bits 28..31 the scale. The eight aux words, one a lane: the top halves of the u64s.
    const __m256i lo = _mm256_srli_epi64(load256(bytes8), 32);
    const __m256i hi = _mm256_and_si256(load256(bytes8 + 32), _mm256_set1_epi64x(-(1ll << 32)));
    const __m256i aux = _mm256_permutevar8x32_epi32(_mm256_or_si256(lo, hi),
                                                    _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    const __m256i signs = iq_sign_words(aux);
    for (int c = 0; c < 8; ++c) {
      const uint8_t* idx = bytes8 + 8 * c;
      k.u[c] = apply_signs(grid8x4(kIq2xxsGrid, idx[0], idx[1], idx[2], idx[3]), lane(signs, c));
    }
    k.scale16 = odd_scales_x2(_mm256_srli_epi32(aux, 28));
    k.d = _cvtsh_ss(b.d) * 0.125f, k.dmin = 0;
  }
};

struct DecIQ2_XS {
  using Block = BlockIQ2_XS;
  static void decode(const Block& b, KDecoded& k) {
    // The 32 sign indices (qs >> 9) as bytes in group order (packus interleaves 128-bit lanes).
    const __m256i q0 = load256(b.qs), q1 = load256(b.qs + 16);
    const __m256i index = _mm256_permute4x64_epi64(
        _mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9)), 0xD8);
    const __m256i signs = iq_sign_bytes(index);
    for (int c = 0; c < 8; ++c) {
      const uint16_t* q = b.qs + 4 * c;
      k.u[c] = apply_signs(grid8x4(kIq2xsGrid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511),
                           lane(signs, c));
    }
    k.scale16 = iq2_nibble_scales(b.scales);
    k.d = _cvtsh_ss(b.d) * 0.125f, k.dmin = 0;
  }
};

struct DecIQ2_S {
  using Block = BlockIQ2_S;
  static void decode(const Block& b, KDecoded& k) {
    for (int c = 0; c < 8; ++c) {
      const uint8_t* q = b.qs + 4 * c;
      const uint32_t h = b.qh[c];
      k.u[c] = apply_signs(grid8x4(kIq2sGrid, q[0] | (h & 3) << 8, q[1] | (h & 12) << 6,
                                   q[2] | (h & 48) << 4, q[3] | (h & 192) << 2),
                           load_u32(b.qs + kQKK / 8 + 4 * c));
    }
    k.scale16 = iq2_nibble_scales(b.scales);
    k.d = _cvtsh_ss(b.d) * 0.125f, k.dmin = 0;
  }
};

struct DecIQ3_XXS {
  using Block = BlockIQ3_XXS;
  static void decode(const Block& b, KDecoded& k) {
    const __m256i aux = load256(b.qs + kQKK / 4);  // a u32 per sub-block: sign indices, scale
    const __m256i signs = iq_sign_words(aux);
    for (int c = 0; c < 8; ++c) {
      const uint8_t* q = b.qs + 8 * c;
      const uint32_t i[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
      k.u[c] = apply_signs(grid4x8(kIq3xxsGrid, i), lane(signs, c));
    }
    k.scale16 = odd_scales_x2(_mm256_srli_epi32(aux, 28));
    k.d = _cvtsh_ss(b.d) * 0.25f, k.dmin = 0;
  }
};

struct DecIQ3_S {
  using Block = BlockIQ3_S;
  static void decode(const Block& b, KDecoded& k) {
    for (int c = 0; c < 8; ++c) {
      const uint8_t* q = b.qs + 8 * c;
      const uint32_t h = b.qh[c];
      uint32_t i[8];
      for (int j = 0; j < 8; ++j) i[j] = q[j] | ((h >> j) & 1) << 8;
      k.u[c] = apply_signs(grid4x8(kIq3sGrid, i), load_u32(b.signs + 4 * c));
    }
    // Scale c is nibble c % 2 of scales[c / 2].
    const __m256i s4 = _mm256_set1_epi32(static_cast<int>(load_u32(b.scales)));
    k.scale16 = odd_scales_x2(
        _mm256_and_si256(_mm256_srlv_epi32(s4, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                         _mm256_set1_epi32(0x0F)));
    k.d = _cvtsh_ss(b.d), k.dmin = 0;
  }
};

// 8 grid + delta for four i1 grid entries (bytes -1, 0, 1), each group's delta byte (+-1) given.
inline __m256i iq1_values(__m256i grid, __m256i delta) {
  return _mm256_add_epi8(_mm256_sign_epi8(bytes(8), grid), delta);
}

struct DecIQ1_S {
  using Block = BlockIQ1_S;
  static void decode(const Block& b, KDecoded& k) {
    for (int c = 0; c < 8; ++c) {
      const uint32_t qh = b.qh[c];
      const uint8_t* q = b.qs + 4 * c;
      const __m256i grid = grid8x4(kIq1sGrid, q[0] | (qh & 7) << 8, q[1] | (qh & 0x38) << 5,
                                   q[2] | (qh & 0x1C0) << 2, q[3] | (qh & 0xE00) >> 1);
      k.u[c] = iq1_values(grid, bytes(qh & 0x8000 ? -1 : 1));
    }
    const __m256i qh32 =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)));
    k.scale16 = odd_scales_x2(_mm256_and_si256(_mm256_srli_epi32(qh32, 12), _mm256_set1_epi32(7)));
    k.d = _cvtsh_ss(b.d) * 0.125f, k.dmin = 0;
  }
};

// iq1_m's sixteen scales (2 s + 1, int16 lane j for 16-element sub-block j) and its f16
// super-scale, which is spread over the top nibbles of the four scale words.
inline float iq1m_scales(const BlockIQ1_M& b, __m256i& scale16) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof(sc));
  const auto d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                            ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  // Scale j is bits 3 (j % 4) .. + 2 of sc[j / 4]: each 16-bit lane takes its u16, shifted left
  // so that those bits are its top three, then down by 13.
  uint64_t all;
  std::memcpy(&all, sc, sizeof(all));
  const __m256i u16 =
      _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<int64_t>(all)),
                          _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4,
                                           5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
  const __m256i top =
      _mm256_mullo_epi16(u16, _mm256_setr_epi16(8192, 1024, 128, 16, 8192, 1024, 128, 16, 8192,
                                                1024, 128, 16, 8192, 1024, 128, 16));
  scale16 =
      _mm256_add_epi16(_mm256_slli_epi16(_mm256_srli_epi16(top, 13), 1), _mm256_set1_epi16(1));
  return _cvtsh_ss(d_bits) * 0.125f;
}

struct DecIQ1_M {
  using Block = BlockIQ1_M;
  static void decode(const Block& b, KDecoded& k) {
    // Group g's nibble: nibble g % 2 of qh[g / 2]; its low 3 bits are the grid index's high bits,
    // bit 3 the delta's sign. The deltas of chunk c's four groups: bits 3, 7, 11, 15 of its u16,
    // each tested in the group's 8 bytes (a vector held across the chunks spilled on AVX2).
    const __m256i pick =
        _mm256_set_epi64x(0x0101010101010101, 0x0101010101010101, 0, 0);  // the u16's byte
    const __m256i bit =
        _mm256_set_epi64x(static_cast<int64_t>(0x8080808080808080), 0x0808080808080808,
                          static_cast<int64_t>(0x8080808080808080), 0x0808080808080808);
    for (int c = 0; c < 8; ++c) {
      const uint8_t* q = b.qs + 4 * c;
      const uint32_t h = b.qh[2 * c] | static_cast<uint32_t>(b.qh[2 * c + 1]) << 8;
      const __m256i grid = grid8x4(kIq1sGrid, q[0] | (h & 7) << 8, q[1] | (h & 0x70) << 4,
                                   q[2] | (h & 0x700), q[3] | (h & 0x7000) >> 4);
      const __m256i hb = _mm256_and_si256(
          _mm256_shuffle_epi8(_mm256_set1_epi16(static_cast<int16_t>(h)), pick), bit);
      k.u[c] = iq1_values(grid, _mm256_or_si256(_mm256_cmpeq_epi8(hb, bit), bytes(1)));
    }
    k.d = iq1m_scales(b, k.scale16), k.dmin = 0;
  }
};

// Each byte times 3, modulo 256.
inline __m256i times3(__m256i v) {
  return _mm256_add_epi8(v, _mm256_add_epi8(v, v));
}

// For bytes y = (u8)(q * 3^n): trit n of q less 1, ((y * 3) >> 8) - 1, which is -1 below 86, 0
// below 171, else 1 (unsigned compares as signed ones on y - 128).
inline __m256i ternary(__m256i y) {
  const __m256i s = _mm256_xor_si256(y, bytes(0x80));
  const __m256i above85 = _mm256_cmpgt_epi8(s, bytes(85 - 128));
  const __m256i above170 = _mm256_cmpgt_epi8(s, bytes(170 - 128));
  return _mm256_sub_epi8(_mm256_sub_epi8(bytes(-1), above85), above170);
}

struct DecTQ1_0 {
  using Block = BlockTQ1_0;
  static void decode(const Block& b, KDecoded& k) {
    // Chunks 0..4: trit n of qs[0..31]. Chunks 5 and 6: trits 0, 1 and 2, 3 of qs[32..47] (a
    // half each); chunk 7: trit 4 of qs[32..47], then trit n of qh[0..3] for n = 0..3.
    __m256i y = load256(b.qs);
    for (int n = 0; n < 5; ++n, y = times3(y)) k.u[n] = ternary(y);
    __m256i mid[5] = {
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 32)))};
    __m256i qh[4] = {_mm256_set1_epi32(static_cast<int>(load_u32(b.qh)))};
    for (int n = 1; n < 5; ++n) mid[n] = times3(mid[n - 1]);
    for (int n = 1; n < 4; ++n) qh[n] = times3(qh[n - 1]);
    k.u[5] = ternary(_mm256_permute2x128_si256(mid[0], mid[1], 0x30));
    k.u[6] = ternary(_mm256_permute2x128_si256(mid[2], mid[3], 0x30));
    __m256i last = mid[4];
    last = _mm256_blend_epi32(last, qh[0], 0x10);
    last = _mm256_blend_epi32(last, qh[1], 0x20);
    last = _mm256_blend_epi32(last, qh[2], 0x40);
    k.u[7] = ternary(_mm256_blend_epi32(last, qh[3], 0x80));
    k.scale16 = _mm256_set1_epi16(1);
    k.d = _cvtsh_ss(b.d), k.dmin = 0;
  }
};

struct DecTQ2_0 {
  using Block = BlockTQ2_0;
  static void decode(const Block& b, KDecoded& k) {
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(b.qs + 32 * h);
      for (int s = 0; s < 4; ++s)
        k.u[4 * h + s] =
            _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, 2 * s), bytes(3)), bytes(1));
    }
    k.scale16 = _mm256_set1_epi16(1);
    k.d = _cvtsh_ss(b.d), k.dmin = 0;
  }
};

// The signed values v as unsigned codes v + 2^kShift (all below 128, as vpmaddubsw needs) with
// the offset 2^kShift, which KKernel and the k-quant GEMM take off through the activations'
// sub-block sums: cheaper than the sign trick of signed values (two byte-sign operations per
// chunk and activation row).
template <class Signed, int kShift>
struct Biased {
  using Block = typename Signed::Block;
  static constexpr int kOffsetShift = kShift;
  static constexpr bool kMin = false, kSigned = false;
  static void decode(const Block& b, KDecoded& k) {
    Signed::decode(b, k);
    for (int c = 0; c < 8; ++c) k.u[c] = _mm256_add_epi8(k.u[c], bytes(1 << kShift));
  }
};

// |v| <= 43 (i2 grids), 62 (iq3_xxs), 15 (iq3_s), 9 (i1 grids), 1 (ternary: tq2_0's 2).
using LowbitIQ2_XXS = Biased<DecIQ2_XXS, 6>;
using LowbitIQ2_XS = Biased<DecIQ2_XS, 6>;
using LowbitIQ2_S = Biased<DecIQ2_S, 6>;
using LowbitIQ3_XXS = Biased<DecIQ3_XXS, 6>;
using LowbitIQ3_S = Biased<DecIQ3_S, 4>;
using LowbitIQ1_S = Biased<DecIQ1_S, 4>;
using LowbitIQ1_M = Biased<DecIQ1_M, 4>;
using LowbitTQ1_0 = Biased<DecTQ1_0, 0>;
using LowbitTQ2_0 = Biased<DecTQ2_0, 0>;

template <class Ops>
RowsKernel x86_lowbit_kernel(DType t) {
  switch (t) {
    case DType::IQ2_XXS:
      return krows_driver<KKernel<Ops, LowbitIQ2_XXS>>;
    case DType::IQ2_XS:
      return krows_driver<KKernel<Ops, LowbitIQ2_XS>>;
    case DType::IQ2_S:
      return krows_driver<KKernel<Ops, LowbitIQ2_S>>;
    case DType::IQ3_XXS:
      return krows_driver<KKernel<Ops, LowbitIQ3_XXS>>;
    case DType::IQ3_S:
      return krows_driver<KKernel<Ops, LowbitIQ3_S>>;
    case DType::IQ1_S:
      return krows_driver<KKernel<Ops, LowbitIQ1_S>>;
    case DType::IQ1_M:
      return krows_driver<KKernel<Ops, LowbitIQ1_M>>;
    case DType::TQ1_0:
      return krows_driver<KKernel<Ops, LowbitTQ1_0>>;
    case DType::TQ2_0:
      return krows_driver<KKernel<Ops, LowbitTQ2_0>>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace ts::cpu
