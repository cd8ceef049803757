// AVX2 decoders of the low-bit types to f32, eight elements a vector: the grid entry's bytes
// widened to f32, times the group's scale, the signs applied by flipping sign bits. Each value is
// computed with the reference dequantisation's operations in its order (quant/dequant.cpp), so the
// decoded rows are the reference's bit for bit.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_lowbit.h"
#include "core/error.h"
#include "quant/blocks.h"
#include "quant/dequant.h"
#include "quant/iq_grids.h"

TS_ISA_BEGIN("avx2,fma,f16c")

namespace ts::cpu {
namespace {

// The 8 unsigned bytes of a grid entry as f32.
inline __m256 u8x8(uint64_t entry) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(entry))));
}

// The 8 signed bytes of an i1 grid entry (-1, 0, 1) as f32.
inline __m256 i8x8(uint64_t entry) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(entry))));
}

// Sign bit of lane j set where bit j of `signs` is.
inline __m256 sign_bits(uint32_t signs) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i set =
      _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(signs)), bit), bit);
  return _mm256_castsi256_ps(_mm256_slli_epi32(set, 31));
}

// out[0..8) = sign(scale * grid values).
inline void store_signed(float* out, float scale, __m256 grid, uint32_t signs) {
  _mm256_storeu_ps(out,
                   _mm256_xor_ps(_mm256_mul_ps(_mm256_set1_ps(scale), grid), sign_bits(signs)));
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void decode_iq2_xxs(const BlockIQ2_XXS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < kQKK / 32; ++ib) {
    const uint32_t aux0 = load_u32(b.qs + 4 * ib);
    const uint32_t aux1 = load_u32(b.qs + 4 * ib + 2);
    const float db = d * (0.5f + static_cast<float>(aux1 >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l)
      store_signed(y + 32 * ib + 8 * l, db, u8x8(kIq2xxsGrid[(aux0 >> (8 * l)) & 0xFF]),
                   kIqSigns[(aux1 >> (7 * l)) & 127]);
  }
}

// The scale of group g (of 8) of iq2_xs / iq2_s: 4 bits per 16 elements.
inline float iq2_scale(const uint8_t* scales, int g, float d) {
  const int s = (scales[g / 4] >> (4 * ((g / 2) % 2))) & 0x0F;
  return d * (0.5f + static_cast<float>(s)) * 0.25f;
}

void decode_iq2_xs(const BlockIQ2_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int g = 0; g < kQKK / 8; ++g)
    store_signed(y + 8 * g, iq2_scale(b.scales, g, d), u8x8(kIq2xsGrid[b.qs[g] & 511]),
                 kIqSigns[b.qs[g] >> 9]);
}

void decode_iq2_s(const BlockIQ2_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int g = 0; g < kQKK / 8; ++g) {
    const int index = b.qs[g] | (((b.qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
    store_signed(y + 8 * g, iq2_scale(b.scales, g, d), u8x8(kIq2sGrid[index]), b.qs[kQKK / 8 + g]);
  }
}

// Two 4-value entries of an i3 grid as one group of 8.
inline __m256 u8x4x2(uint32_t lo, uint32_t hi) {
  return u8x8(static_cast<uint64_t>(lo) | static_cast<uint64_t>(hi) << 32);
}

void decode_iq3_xxs(const BlockIQ3_XXS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < kQKK / 32; ++ib) {
    const uint32_t aux = load_u32(b.qs + kQKK / 4 + 4 * ib);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint8_t* q = b.qs + 8 * ib + 2 * l;
      store_signed(y + 32 * ib + 8 * l, db, u8x4x2(kIq3xxsGrid[q[0]], kIq3xxsGrid[q[1]]),
                   kIqSigns[(aux >> (7 * l)) & 127]);
    }
  }
}

void decode_iq3_s(const BlockIQ3_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int g = 0; g < kQKK / 8; ++g) {
    const int s = (b.scales[g / 8] >> (4 * ((g / 4) % 2))) & 0x0F;
    const float db = d * static_cast<float>(1 + 2 * s);
    const int i0 = 2 * g, i1 = 2 * g + 1;
    const int index0 = b.qs[i0] | (((b.qh[i0 / 8] >> (i0 % 8)) & 1) << 8);
    const int index1 = b.qs[i1] | (((b.qh[i1 / 8] >> (i1 % 8)) & 1) << 8);
    store_signed(y + 8 * g, db, u8x4x2(kIq3sGrid[index0], kIq3sGrid[index1]), b.signs[g]);
  }
}

// out[0..8) = dl * (grid values + delta).
inline void store_iq1(float* out, float dl, uint64_t entry, float delta) {
  _mm256_storeu_ps(
      out, _mm256_mul_ps(_mm256_set1_ps(dl), _mm256_add_ps(i8x8(entry), _mm256_set1_ps(delta))));
}

void decode_iq1_s(const BlockIQ1_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < kQKK / 32; ++ib) {
    const int qh = b.qh[ib];
    const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
    const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
    for (int l = 0; l < 4; ++l)
      store_iq1(y + 32 * ib + 8 * l, dl, kIq1sGrid[b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)],
                delta);
  }
}

void decode_iq1_m(const BlockIQ1_M& b, float* y) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof(sc));
  const auto d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                            ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  const float d = f16_to_f32(d_bits);
  for (int g = 0; g < kQKK / 8; ++g) {
    const int k = g / 2;
    const int s = (sc[k / 4] >> (3 * (k % 4))) & 7;
    const float dl = d * static_cast<float>(2 * s + 1);
    const int nib = (b.qh[g / 2] >> (4 * (g % 2))) & 0x0F;
    store_iq1(y + 8 * g, dl, kIq1sGrid[b.qs[g] | ((nib & 7) << 8)],
              nib & 8 ? -kIq1Delta : kIq1Delta);
  }
}

// d * (q - 1) for 8 codes q (int32 lanes, 0..2).
inline void store_ternary(float* out, __m256 d, __m256i q) {
  const __m256i t = _mm256_sub_epi32(q, _mm256_set1_epi32(1));
  _mm256_storeu_ps(out, _mm256_mul_ps(d, _mm256_cvtepi32_ps(t)));
}

// Trit n of 8 bytes: ((u8)(q * 3^n) * 3) >> 8, in int32 lanes.
inline __m256i trits8(const uint8_t* q, int pow3) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
  const __m256i wrapped =
      _mm256_and_si256(_mm256_mullo_epi32(v, _mm256_set1_epi32(pow3)), _mm256_set1_epi32(0xFF));
  return _mm256_srli_epi32(_mm256_mullo_epi32(wrapped, _mm256_set1_epi32(3)), 8);
}

void decode_tq1_0(const BlockTQ1_0& b, float* y) {
  static constexpr int kPow3[5] = {1, 3, 9, 27, 81};
  const __m256 d = _mm256_set1_ps(f16_to_f32(b.d));
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; m += 8) store_ternary(y + 32 * n + m, d, trits8(b.qs + m, kPow3[n]));
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; m += 8)
      store_ternary(y + 160 + 16 * n + m, d, trits8(b.qs + 32 + m, kPow3[n]));
  // The last 16 elements: trit n of the four qh bytes, four to a row of 4.
  uint8_t qh[8];
  std::memcpy(qh, b.qh, 4);
  std::memcpy(qh + 4, b.qh, 4);
  for (int n = 0; n < 4; n += 2) {
    const __m256i lo = trits8(qh, kPow3[n]);
    const __m256i hi = trits8(qh, kPow3[n + 1]);
    store_ternary(y + 240 + 4 * n, d, _mm256_blend_epi32(lo, hi, 0xF0));
  }
}

void decode_tq2_0(const BlockTQ2_0& b, float* y) {
  const __m256 d = _mm256_set1_ps(f16_to_f32(b.d));
  for (int h = 0; h < 2; ++h)
    for (int m = 0; m < 32; m += 8) {
      const __m256i v = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 32 * h + m)));
      for (int s = 0; s < 4; ++s)
        store_ternary(y + 128 * h + 32 * s + m, d,
                      _mm256_and_si256(_mm256_srli_epi32(v, 2 * s), _mm256_set1_epi32(3)));
    }
}

template <class Block>
void decode_blocks(void (*one)(const Block&, float*), const uint8_t* row, float* out,
                   int64_t cols) {
  const auto* blocks = reinterpret_cast<const Block*>(row);
  for (int64_t i = 0; i < cols / kQKK; ++i) one(blocks[i], out + i * kQKK);
}

void decode_row_avx2(DType t, const uint8_t* row, float* out, int64_t cols) {
  switch (t) {
    case DType::IQ2_XXS:
      return decode_blocks<BlockIQ2_XXS>(decode_iq2_xxs, row, out, cols);
    case DType::IQ2_XS:
      return decode_blocks<BlockIQ2_XS>(decode_iq2_xs, row, out, cols);
    case DType::IQ2_S:
      return decode_blocks<BlockIQ2_S>(decode_iq2_s, row, out, cols);
    case DType::IQ3_XXS:
      return decode_blocks<BlockIQ3_XXS>(decode_iq3_xxs, row, out, cols);
    case DType::IQ3_S:
      return decode_blocks<BlockIQ3_S>(decode_iq3_s, row, out, cols);
    case DType::IQ1_S:
      return decode_blocks<BlockIQ1_S>(decode_iq1_s, row, out, cols);
    case DType::IQ1_M:
      return decode_blocks<BlockIQ1_M>(decode_iq1_m, row, out, cols);
    case DType::TQ1_0:
      return decode_blocks<BlockTQ1_0>(decode_tq1_0, row, out, cols);
    case DType::TQ2_0:
      return decode_blocks<BlockTQ2_0>(decode_tq2_0, row, out, cols);
    default:
      fail(ErrorKind::Runtime, std::string("lowbit decoder: not a low-bit type: ") + dtype_name(t));
  }
}

}  // namespace

LowbitRowDecoder lowbit_decoder_avx2() {
  return decode_row_avx2;
}

}  // namespace ts::cpu

TS_ISA_END()
