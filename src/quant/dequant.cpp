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
    default:
      fail(ErrorKind::Unsupported,
           std::string("dequantize_row: no dequantisation for dtype ") + info.name);
  }
}

}  // namespace ts
