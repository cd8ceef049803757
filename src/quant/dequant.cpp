// Reference dequantisation: one function per block format, following the element order written
// next to each struct in blocks.h, with the operations in the order of the gguf package's numpy
// dequantisers. The results match those bit for bit, also when the compiler fuses a multiply and
// an add: an f16 scale (11 significant bits) times a 6-bit sub-scale times a quant of at most 6
// bits is exact in f32, so only the final add or subtract rounds.
#include "quant/dequant.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/blocks.h"
#include "quant/iq_grids.h"

namespace ts {
namespace {

template <class Block>
const Block* blocks_of(const void* src) {
  return static_cast<const Block*>(src);
}

// Nibble i (< 32) of a 32-element block: low nibbles first, then high nibbles.
int nibble32(const uint8_t* qs, int i) {
  return i < 16 ? qs[i] & 0x0F : qs[i - 16] >> 4;
}

int fifth_bit32(const uint8_t* qh, int i) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  return (bits >> i) & 1;
}

void dequant_q4_0(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int i = 0; i < kQK32; ++i) y[i] = d * static_cast<float>(nibble32(b.qs, i) - 8);
}

void dequant_q4_1(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  for (int i = 0; i < kQK32; ++i) y[i] = d * static_cast<float>(nibble32(b.qs, i)) + m;
}

void dequant_q5_0(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int i = 0; i < kQK32; ++i) {
    const int q = nibble32(b.qs, i) | (fifth_bit32(b.qh, i) << 4);
    y[i] = d * static_cast<float>(q - 16);
  }
}

void dequant_q5_1(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  for (int i = 0; i < kQK32; ++i) {
    const int q = nibble32(b.qs, i) | (fifth_bit32(b.qh, i) << 4);
    y[i] = d * static_cast<float>(q) + m;
  }
}

void dequant_q8_0(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int i = 0; i < kQK32; ++i) y[i] = static_cast<float>(b.qs[i]) * d;
}

void dequant_q2_k(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, s = (e / 32) % 4, l = e % 32;
    const int q = (b.qs[32 * h + l] >> (2 * s)) & 3;
    const int j = e / 16;
    const float dl = d * static_cast<float>(b.scales[j] & 0x0F);
    const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
    y[e] = dl * static_cast<float>(q) - ml;
  }
}

void dequant_q3_k(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQKK; ++e) {
    const int c = e / 32, l = e % 32;
    const int low = (b.qs[32 * (c / 4) + l] >> (2 * (c % 4))) & 3;
    const int high = (b.hmask[l] >> c) & 1;
    const float dl = d * static_cast<float>(q3k_scale(b.scales, e / 16));
    y[e] = dl * static_cast<float>(low - (high ? 0 : 4));
  }
}

void dequant_q4_k(const BlockQ4_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int e = 0; e < kQKK; ++e) {
    const int c = e / 64, n = (e / 32) % 2, l = e % 32;
    uint8_t scale, min;
    k4_scale_min(b.scales, e / 32, scale, min);
    const int q = (b.qs[32 * c + l] >> (4 * n)) & 0x0F;
    y[e] = d * static_cast<float>(scale) * static_cast<float>(q) - dmin * static_cast<float>(min);
  }
}

void dequant_q5_k(const BlockQ5_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int e = 0; e < kQKK; ++e) {
    const int c = e / 64, n = (e / 32) % 2, l = e % 32;
    uint8_t scale, min;
    k4_scale_min(b.scales, e / 32, scale, min);
    const int q = ((b.qs[32 * c + l] >> (4 * n)) & 0x0F) | (((b.qh[l] >> (e / 32)) & 1) << 4);
    y[e] = d * static_cast<float>(scale) * static_cast<float>(q) - dmin * static_cast<float>(min);
  }
}

void dequant_q6_k(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, r = e % 128;
    const int low = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
    const int high = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
    const float dl = d * static_cast<float>(b.scales[e / 16]);
    y[e] = dl * static_cast<float>((low | (high << 4)) - 32);
  }
}

void dequant_iq4_nl(const BlockIQ4_NL& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int i = 0; i < kQK32; ++i) y[i] = d * static_cast<float>(kIq4Levels[nibble32(b.qs, i)]);
}

void dequant_iq4_xs(const BlockIQ4_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQKK; ++e) {
    const int j = e / 32;
    const float dl = d * static_cast<float>(iq4xs_scale(b, j));
    y[e] =
        dl * static_cast<float>(kIq4Levels[nibble32(b.qs + static_cast<size_t>(16 * j), e % 32)]);
  }
}

// As gguf-py: the doubled e2m1 value times half the e8m0 scale (exact).
void dequant_mxfp4(const BlockMXFP4& b, float* y) {
  const float d = mxfp4_half_scale(b.e);
  for (int i = 0; i < kQK32; ++i) y[i] = d * static_cast<float>(kMxfp4Doubled[nibble32(b.qs, i)]);
}

// The low-bit types: per group, the scale first (as gguf-py computes it), then scale * grid value,
// then the sign (exact), in gguf-py's order.

uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

uint8_t grid_byte(uint64_t entry, int j) {
  return static_cast<uint8_t>(entry >> (8 * j));
}

float signed_value(float v, uint8_t signs, int j) {
  return (signs >> j) & 1 ? -v : v;
}

void dequant_iq2_xxs(const BlockIQ2_XXS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < kQKK / 32; ++ib) {
    const uint32_t aux0 = load_u32(b.qs + 4 * ib);
    const uint32_t aux1 = load_u32(b.qs + 4 * ib + 2);
    const float db = d * (0.5f + static_cast<float>(aux1 >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = kIq2xxsGrid[(aux0 >> (8 * l)) & 0xFF];
      const uint8_t signs = kIqSigns[(aux1 >> (7 * l)) & 127];
      for (int j = 0; j < 8; ++j)
        y[32 * ib + 8 * l + j] = signed_value(db * static_cast<float>(grid_byte(g, j)), signs, j);
    }
  }
}

float iq2_scale(const uint8_t* scales, int g, float d) {
  const int s = (scales[g / 4] >> (4 * ((g / 2) % 2))) & 0x0F;
  return d * (0.5f + static_cast<float>(s)) * 0.25f;
}

void dequant_iq2_xs(const BlockIQ2_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int g = 0; g < kQKK / 8; ++g) {
    const float db = iq2_scale(b.scales, g, d);
    const uint64_t grid = kIq2xsGrid[b.qs[g] & 511];
    const uint8_t signs = kIqSigns[b.qs[g] >> 9];
    for (int j = 0; j < 8; ++j)
      y[8 * g + j] = signed_value(db * static_cast<float>(grid_byte(grid, j)), signs, j);
  }
}

void dequant_iq2_s(const BlockIQ2_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int g = 0; g < kQKK / 8; ++g) {
    const float db = iq2_scale(b.scales, g, d);
    const uint64_t grid = kIq2sGrid[b.qs[g] | (((b.qh[g / 4] >> (2 * (g % 4))) & 3) << 8)];
    const uint8_t signs = b.qs[kQKK / 8 + g];
    for (int j = 0; j < 8; ++j)
      y[8 * g + j] = signed_value(db * static_cast<float>(grid_byte(grid, j)), signs, j);
  }
}

void dequant_iq3_xxs(const BlockIQ3_XXS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < kQKK / 32; ++ib) {
    const uint32_t aux = load_u32(b.qs + kQKK / 4 + 4 * ib);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint8_t signs = kIqSigns[(aux >> (7 * l)) & 127];
      for (int j = 0; j < 8; ++j) {
        const uint32_t g = kIq3xxsGrid[b.qs[8 * ib + 2 * l + j / 4]];
        y[32 * ib + 8 * l + j] =
            signed_value(db * static_cast<float>(grid_byte(g, j % 4)), signs, j);
      }
    }
  }
}

void dequant_iq3_s(const BlockIQ3_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQKK; ++e) {
    const int s = (b.scales[e / 64] >> (4 * ((e / 32) % 2))) & 0x0F;
    const float db = d * static_cast<float>(1 + 2 * s);
    const int i = e / 4;
    const uint32_t g = kIq3sGrid[b.qs[i] | (((b.qh[i / 8] >> (i % 8)) & 1) << 8)];
    y[e] = signed_value(db * static_cast<float>(grid_byte(g, e % 4)), b.signs[e / 8], e % 8);
  }
}

float iq1_value(uint64_t grid, int j, float delta) {
  return static_cast<float>(static_cast<int8_t>(grid_byte(grid, j))) + delta;
}

void dequant_iq1_s(const BlockIQ1_S& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < kQKK / 32; ++ib) {
    const int qh = b.qh[ib];
    const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
    const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
    for (int l = 0; l < 4; ++l) {
      const uint64_t grid = kIq1sGrid[b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
      for (int j = 0; j < 8; ++j) y[32 * ib + 8 * l + j] = dl * iq1_value(grid, j, delta);
    }
  }
}

void dequant_iq1_m(const BlockIQ1_M& b, float* y) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof(sc));
  const uint16_t d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  const float d = f16_to_f32(d_bits);
  for (int g = 0; g < kQKK / 8; ++g) {
    const int k = g / 2;  // scale of 16 elements
    const int s = (sc[k / 4] >> (3 * (k % 4))) & 7;
    const float dl = d * static_cast<float>(2 * s + 1);
    const int nib = (b.qh[g / 2] >> (4 * (g % 2))) & 0x0F;
    const float delta = nib & 8 ? -kIq1Delta : kIq1Delta;
    const uint64_t grid = kIq1sGrid[b.qs[g] | ((nib & 7) << 8)];
    for (int j = 0; j < 8; ++j) y[8 * g + j] = dl * iq1_value(grid, j, delta);
  }
}

int trit(uint8_t q, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto shifted = static_cast<uint8_t>(q * kPow3[n]);  // wraps mod 256, as in ggml
  return (shifted * 3) >> 8;
}

void dequant_tq1_0(const BlockTQ1_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) y[32 * n + m] = d * static_cast<float>(trit(b.qs[m], n) - 1);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m)
      y[160 + 16 * n + m] = d * static_cast<float>(trit(b.qs[32 + m], n) - 1);
  for (int n = 0; n < 4; ++n)
    for (int m = 0; m < 4; ++m) y[240 + 4 * n + m] = d * static_cast<float>(trit(b.qh[m], n) - 1);
}

void dequant_tq2_0(const BlockTQ2_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, s = (e / 32) % 4, m = e % 32;
    y[e] = d * static_cast<float>(((b.qs[32 * h + m] >> (2 * s)) & 3) - 1);
  }
}

template <class Block>
void dequant_blocks(void (*one)(const Block&, float*), const void* src, float* dst, int64_t n,
                    int block_elems) {
  const Block* blocks = blocks_of<Block>(src);
  for (int64_t i = 0; i < n / block_elems; ++i) one(blocks[i], dst + i * block_elems);
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  if (n < 0 || n % info.block_elems != 0)
    fail(ErrorKind::Model, std::string("dequantize_row: ") + std::to_string(n) +
                               " elements is not a whole number of " + info.name + " blocks");
  const auto* h = static_cast<const uint16_t*>(src);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    case DType::Q4_0:
      return dequant_blocks<BlockQ4_0>(dequant_q4_0, src, dst, n, kQK32);
    case DType::Q4_1:
      return dequant_blocks<BlockQ4_1>(dequant_q4_1, src, dst, n, kQK32);
    case DType::Q5_0:
      return dequant_blocks<BlockQ5_0>(dequant_q5_0, src, dst, n, kQK32);
    case DType::Q5_1:
      return dequant_blocks<BlockQ5_1>(dequant_q5_1, src, dst, n, kQK32);
    case DType::Q8_0:
      return dequant_blocks<BlockQ8_0>(dequant_q8_0, src, dst, n, kQK32);
    case DType::Q2_K:
      return dequant_blocks<BlockQ2_K>(dequant_q2_k, src, dst, n, kQKK);
    case DType::Q3_K:
      return dequant_blocks<BlockQ3_K>(dequant_q3_k, src, dst, n, kQKK);
    case DType::Q4_K:
      return dequant_blocks<BlockQ4_K>(dequant_q4_k, src, dst, n, kQKK);
    case DType::Q5_K:
      return dequant_blocks<BlockQ5_K>(dequant_q5_k, src, dst, n, kQKK);
    case DType::Q6_K:
      return dequant_blocks<BlockQ6_K>(dequant_q6_k, src, dst, n, kQKK);
    case DType::IQ4_NL:
      return dequant_blocks<BlockIQ4_NL>(dequant_iq4_nl, src, dst, n, kQK32);
    case DType::IQ4_XS:
      return dequant_blocks<BlockIQ4_XS>(dequant_iq4_xs, src, dst, n, kQKK);
    case DType::MXFP4:
      return dequant_blocks<BlockMXFP4>(dequant_mxfp4, src, dst, n, kQK32);
    case DType::IQ2_XXS:
      return dequant_blocks<BlockIQ2_XXS>(dequant_iq2_xxs, src, dst, n, kQKK);
    case DType::IQ2_XS:
      return dequant_blocks<BlockIQ2_XS>(dequant_iq2_xs, src, dst, n, kQKK);
    case DType::IQ2_S:
      return dequant_blocks<BlockIQ2_S>(dequant_iq2_s, src, dst, n, kQKK);
    case DType::IQ3_XXS:
      return dequant_blocks<BlockIQ3_XXS>(dequant_iq3_xxs, src, dst, n, kQKK);
    case DType::IQ3_S:
      return dequant_blocks<BlockIQ3_S>(dequant_iq3_s, src, dst, n, kQKK);
    case DType::IQ1_S:
      return dequant_blocks<BlockIQ1_S>(dequant_iq1_s, src, dst, n, kQKK);
    case DType::IQ1_M:
      return dequant_blocks<BlockIQ1_M>(dequant_iq1_m, src, dst, n, kQKK);
    case DType::TQ1_0:
      return dequant_blocks<BlockTQ1_0>(dequant_tq1_0, src, dst, n, kQKK);
    case DType::TQ2_0:
      return dequant_blocks<BlockTQ2_0>(dequant_tq2_0, src, dst, n, kQKK);
    default:
      fail(ErrorKind::Unsupported,
           std::string("dequantize_row: no dequantisation for dtype ") + info.name);
  }
}

}  // namespace ts
