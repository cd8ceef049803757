// The GGML block layouts, byte for byte, as explicit structs. Scales are stored as raw f16 bits
// (uint16_t) so that the structs have no padding and can be overlaid on file bytes. The element
// order inside each block is documented next to the struct; dequant.cpp and the kernels both
// follow it.
#pragma once

#include <cstdint>

namespace ts {

inline constexpr int kQK32 = 32;         // elements per block of the 32-element types
inline constexpr int kQKK = 256;         // elements per k-quant super-block
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales/mins of q4_k and q5_k

// x[i] = d * (q[i] - 8); element i < 16 is the low nibble of qs[i], i >= 16 the high nibble of
// qs[i - 16].
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// x[i] = d * q[i] + m; nibbles as in q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// x[i] = d * (q[i] - 16); q[i] = nibble as in q4_0 | bit i of qh (little-endian u32) << 4.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// x[i] = d * q[i] + m; q[i] as in q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// x[i] = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 16 sub-blocks of 16. Element e = 128 h + 32 s + l (h < 2, s < 4, l < 32) is
// (qs[32 h + l] >> 2 s) & 3; sub-block j = e / 16 has scale (scales[j] & 15) and min
// (scales[j] >> 4): x = d * scale * q - dmin * min.
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16. Chunk c = e / 32 (e = 32 c + l): low bits (qs[32 (c / 4) + l] >> 2 (c % 4))
// & 3, high bit (hmask[l] >> c) & 1, q = low - (high ? 0 : 4). Sub-block j has a signed 6-bit
// scale (see q3k_scale): x = d * (scale - 32) * q.
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 8 sub-blocks of 32. Element e = 64 c + 32 n + l: nibble n of qs[32 c + l]; sub-block j = e / 32
// has 6-bit scale and min (see k4_scale_min): x = d * scale * q - dmin * min.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As q4_k plus a fifth bit: q = nibble | ((qh[l] >> (e / 32)) & 1) << 4, with l = e % 32.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16. Element e = 128 h + 64 n + l (l < 64): low 4 bits = nibble n of
// ql[64 h + l]; element e = 128 h + 32 s + l (l < 32): high 2 bits = (qh[32 h + l] >> 2 s) & 3.
// x = d * scales[e / 16] * (q - 32).
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// The 16 levels of the non-linear 4-bit types (GGML's iq4 grid): denser near zero, where most
// weights are. Every level fits int8, so a decoded block dots with int8 activations exactly.
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// x[i] = d * kIq4Levels[q[i]]; nibbles as in q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// MXFP4 (OCP microscaling): x[i] = kMxfp4Doubled[q[i]] * 2^(e - 128), nibbles as in q4_0; e is an
// e8m0 exponent (2^(e - 127)) and the table holds the e2m1 values doubled, as ggml keeps them
// (so e = 0 and 1 give 2^-128 and 2^-127 as ggml's e8m0_to_fp32_half does).
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK32 / 2];
};
static_assert(sizeof(BlockMXFP4) == 17);

inline constexpr int8_t kMxfp4Doubled[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                             0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) as f32, exactly (a subnormal for e < 2).
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}

// 8 sub-blocks of 32, sub-block j an iq4_nl block's nibbles in qs[16 j..16 j + 15] with a signed
// 6-bit scale (see iq4xs_scale): x = d * scale_j * kIq4Levels[q].
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The low-bit i-quants and ternary types (256 elements a block). The grids and the sign table are
// in iq_grids.h. Groups of 8 elements (4 for the i3 grids) take their values from a grid entry:
// byte j of the entry is element j of the group. A sign byte gives the signs of 8 elements (bit j
// set: element j negated); the 7-bit sign indices of iq2_xxs / iq2_xs / iq3_xxs name an entry of
// kIqSigns, whose eighth bit makes the count of negatives even.

// 8 sub-blocks of 32; sub-block b is two u32 at qs[4 b] (little-endian): aux0's byte l is the
// grid index of group l (< 4), aux1's bits 7 l..7 l + 6 its sign index and bits 28..31 the scale
// s: x = d * (0.5 + s) * 0.25 * grid * sign.
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[kQKK / 8];
};
static_assert(sizeof(BlockIQ2_XXS) == 66);

// 32 groups of 8: qs[g] is the grid index (low 9 bits) and sign index (top 7 bits) of group g;
// 16 scales of 16 elements, scale k in nibble k % 2 of scales[k / 2]: x = d * (0.5 + s) * 0.25 *
// grid * sign.
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[kQKK / 8];
  uint8_t scales[kQKK / 32];
};
static_assert(sizeof(BlockIQ2_XS) == 74);

// 32 groups of 8: the grid index of group g is qs[g] | ((qh[g / 4] >> 2 (g % 4)) & 3) << 8, its
// signs the byte qs[32 + g]; scales as iq2_xs.
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[kQKK / 4];
  uint8_t qh[kQKK / 32];
  uint8_t scales[kQKK / 32];
};
static_assert(sizeof(BlockIQ2_S) == 82);

// 64 groups of 4 (grid indices qs[0..63]); 8 sub-blocks of 32, sub-block b's u32 at qs[64 + 4 b]
// holds four 7-bit sign indices (one per 8 elements) and the scale s in bits 28..31:
// x = d * (0.5 + s) * 0.5 * grid * sign.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kQKK / 8];
};
static_assert(sizeof(BlockIQ3_XXS) == 98);

// 64 groups of 4: grid index qs[i] | ((qh[i / 8] >> (i % 8)) & 1) << 8; the sign of element e is
// bit e % 8 of signs[e / 8]; 8 scales of 32 elements in nibbles of scales[]: x = d * (1 + 2 s) *
// grid * sign.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kQKK / 4];
  uint8_t qh[kQKK / 32];
  uint8_t signs[kQKK / 8];
  uint8_t scales[kQKK / 64];
};
static_assert(sizeof(BlockIQ3_S) == 110);

inline constexpr float kIq1Delta = 0.125f;

// 32 groups of 8 from the i1 grid (values -1, 0, 1); 8 sub-blocks of 32, sub-block b's u16 qh[b]
// holds 3 high index bits per group (bits 3 l..3 l + 2), the scale s in bits 12..14 and the delta's
// sign in bit 15: index = qs[g] | high << 8, x = d * (2 s + 1) * (grid + delta), delta = +-1/8.
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[kQKK / 8];
  uint16_t qh[kQKK / 32];
};
static_assert(sizeof(BlockIQ1_S) == 50);

// 32 groups of 8 from the i1 grid: index qs[g] | (nibble g % 2 of qh[g / 2] & 7) << 8, the
// nibble's bit 3 the delta's sign; 16 scales of 16 elements, 3 bits each at 3 (k % 4) of the u16
// scales[k / 4]; the f16 super-scale d is the top nibbles of the four u16 (scales[i] >> 12 is
// bits 4 i..4 i + 3 of d): x = d * (2 s + 1) * (grid + delta).
struct BlockIQ1_M {
  uint8_t qs[kQKK / 8];
  uint8_t qh[kQKK / 16];
  uint8_t scales[kQKK / 32];
};
static_assert(sizeof(BlockIQ1_M) == 56);

// Ternary, 5 trits a byte: element 32 n + m (n < 5, m < 32) is trit n of qs[m], element
// 160 + 16 n + m (m < 16) trit n of qs[32 + m], element 240 + 4 n + m (n, m < 4) trit n of qh[m];
// trit n of byte q is ((u8)(q * 3^n) * 3) >> 8 (the byte holds the base-3 number scaled to 0..255).
// x = d * (trit - 1).
struct BlockTQ1_0 {
  uint8_t qs[(kQKK - 4 * kQKK / 64) / 5];
  uint8_t qh[kQKK / 64];
  uint16_t d;
};
static_assert(sizeof(BlockTQ1_0) == 54);

// Ternary, 2 bits an element: element 128 h + 32 s + m is (qs[32 h + m] >> 2 s) & 3; x = d * (q -
// 1).
struct BlockTQ2_0 {
  uint8_t qs[kQKK / 4];
  uint16_t d;
};
static_assert(sizeof(BlockTQ2_0) == 66);

// Activations for the 32-element weight types: x[i] ~= d * qs[i], with sum = sum of qs (the
// weight offsets and mins multiply it). Not a file format: an f32 scale keeps it accurate.
struct BlockQ8A32 {
  float d;
  int32_t sum;
  int8_t qs[kQK32];
};
static_assert(sizeof(BlockQ8A32) == 40);

// Activations for the k-quants (GGML's q8_K layout): x[i] ~= d * qs[i], bsums[j] = sum of the
// 16 qs of sub-block j.
struct BlockQ8K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};
static_assert(sizeof(BlockQ8K) == 292);

// Scale and min of sub-block j (< 8) of q4_k / q5_k: the first four sub-blocks keep 6 bits in
// the low bits of bytes 0..3 (scales) and 4..7 (mins); the last four take their low 4 bits from
// bytes 8..11 and their top 2 bits from the spare top bits of bytes 0..7.
inline void k4_scale_min(const uint8_t* s, int j, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Signed scale (-32..31) of sub-block j (< 16) of q3_k: low 4 bits from nibble j / 8 of byte
// j % 8, top 2 bits from bits 2 (j / 4) of byte 8 + j % 4.
inline int q3k_scale(const uint8_t* s, int j) {
  const int lo = (s[j % 8] >> (4 * (j / 8))) & 0x0F;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 0x03;
  return (lo | (hi << 4)) - 32;
}

// Signed scale (-32..31) of sub-block j (< 8) of iq4_xs: low 4 bits from nibble j % 2 of
// scales_l[j / 2], top 2 bits from bits 2 j of scales_h.
inline int iq4xs_scale(const BlockIQ4_XS& b, int j) {
  const int lo = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
  const int hi = (b.scales_h >> (2 * j)) & 0x03;
  return (lo | (hi << 4)) - 32;
}

}  // namespace ts
