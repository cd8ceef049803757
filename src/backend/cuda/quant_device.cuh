// Device-side decoding of the GGML block formats of quant/blocks.h: eight consecutive elements of
// one block at a time (the unit the GEMV, dequantisation and embedding kernels give each thread).
// The operations follow quant/dequant.cpp in order, so that the results are the reference's bit
// for bit. Blocks must be 2-byte aligned (every block size and field offset is even), but MXFP4's
// 17-byte ones (weight_alignment); the backend checks this when a weight is uploaded.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/dtype.h"

namespace ts::cuda {

__device__ __forceinline__ float half_bits_to_float(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}

// Eight bytes at a 2-byte aligned address, as four 16-bit loads packed little-endian.
__device__ __forceinline__ uint64_t load8_bytes(const uint8_t* p) {
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint64_t>(h[0]) | static_cast<uint64_t>(h[1]) << 16 |
         static_cast<uint64_t>(h[2]) << 32 | static_cast<uint64_t>(h[3]) << 48;
}

__device__ __forceinline__ int byte_of(uint64_t v, int k) {
  return static_cast<int>((v >> (8 * k)) & 0xFF);
}

// q4_k / q5_k sub-block scale and min (see k4_scale_min in quant/blocks.h), 6-bit integers;
// byte(w, i) gives byte i (0..3) of word w (0..2) of the 12 scale bytes, wherever they are
// (memory, or registers). The word is always a constant here, so a register accessor picks it at
// compile time: picking it from a run-time byte index selected between the registers at run time
// and slowed the q4_k GEMV (docs/PERFORMANCE.md, "Measured choices").
template <class Byte>
__device__ __forceinline__ void k4_scale_min_int(const Byte& byte, int j, int& scale, int& min) {
  if (j < 4) {
    scale = byte(0, j) & 63;
    min = byte(1, j) & 63;
  } else {
    scale = (byte(2, j - 4) & 0x0F) | ((byte(0, j - 4) >> 6) << 4);
    min = (byte(2, j - 4) >> 4) | ((byte(1, j - 4) >> 6) << 4);
  }
}

// k4_scale_min_int over a q4_k / q5_k block's first 16 bytes held in registers (d and dmin in x,
// the 12 scale bytes in y, z, w): the word is named, not indexed (an index into registers would put
// them in local memory).
__device__ __forceinline__ void k4_scale_min_head(const uint4& head, int j, int& scale, int& min) {
  k4_scale_min_int(
      [&head](int w, int i) {
        const uint32_t word = w == 0 ? head.y : w == 1 ? head.z : head.w;
        return static_cast<int>((word >> (8 * i)) & 0xFFu);
      },
      j, scale, min);
}

__device__ __forceinline__ void k4_scale_min_dev(const uint8_t* s, int j, float& scale,
                                                 float& min) {
  int sc = 0, mn = 0;
  k4_scale_min_int([s](int w, int i) { return static_cast<int>(s[4 * w + i]); }, j, sc, mn);
  scale = static_cast<float>(sc);
  min = static_cast<float>(mn);
}

// q3_k signed sub-block scale (see q3k_scale in quant/blocks.h).
__device__ __forceinline__ int q3k_scale_dev(const uint8_t* s, int j) {
  const int lo = (s[j % 8] >> (4 * (j / 8))) & 0x0F;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 0x03;
  return (lo | (hi << 4)) - 32;
}

// iq4_xs signed sub-block scale (see iq4xs_scale in quant/blocks.h).
__device__ __forceinline__ int iq4xs_scale_dev(const BlockIQ4_XS* blk, int j) {
  const int lo = (blk->scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
  const int hi = (blk->scales_h >> (2 * j)) & 0x03;
  return (lo | (hi << 4)) - 32;
}

// A 16-entry int8 grid (kIq4Levels, kMxfp4Doubled) as four words of four levels: level i is byte
// i % 4 of word i / 4.
constexpr uint32_t level_word(const int8_t (&levels)[16], int w) {
  return static_cast<uint32_t>(static_cast<uint8_t>(levels[4 * w])) |
         static_cast<uint32_t>(static_cast<uint8_t>(levels[4 * w + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(levels[4 * w + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(levels[4 * w + 3])) << 24;
}

// (Scalars: device code may read a host constexpr scalar, not an aggregate.)
constexpr uint32_t kIq4Word0 = level_word(kIq4Levels, 0), kIq4Word1 = level_word(kIq4Levels, 1);
constexpr uint32_t kIq4Word2 = level_word(kIq4Levels, 2), kIq4Word3 = level_word(kIq4Levels, 3);
constexpr uint32_t kMxfp4Word0 = level_word(kMxfp4Doubled, 0);
constexpr uint32_t kMxfp4Word1 = level_word(kMxfp4Doubled, 1);
constexpr uint32_t kMxfp4Word2 = level_word(kMxfp4Doubled, 2);
constexpr uint32_t kMxfp4Word3 = level_word(kMxfp4Doubled, 3);

// The grid's int8 levels of the four indices (0..15) in the bytes of idx, as bytes: a byte permute
// picks each from levels 0..7 (words w0, w1) and from 8..15 (w2, w3) (selector nibbles of 3 bits:
// bit 3 would sign-extend), and each index's bit 3 chooses between the two.
__device__ __forceinline__ uint32_t grid_levels4(uint32_t idx, uint32_t w0, uint32_t w1,
                                                 uint32_t w2, uint32_t w3) {
  const uint32_t sel =
      (idx & 0x7u) | ((idx >> 4) & 0x70u) | ((idx >> 8) & 0x700u) | ((idx >> 12) & 0x7000u);
  const uint32_t low = __byte_perm(w0, w1, sel);
  const uint32_t high = __byte_perm(w2, w3, sel);
  const uint32_t upper = ((idx >> 3) & 0x01010101u) * 0xFFu;
  return (low & ~upper) | (high & upper);
}

__device__ __forceinline__ uint32_t iq4_levels4(uint32_t idx) {
  return grid_levels4(idx, kIq4Word0, kIq4Word1, kIq4Word2, kIq4Word3);
}

__device__ __forceinline__ uint64_t iq4_levels8(uint64_t idx) {
  return static_cast<uint64_t>(iq4_levels4(static_cast<uint32_t>(idx))) |
         static_cast<uint64_t>(iq4_levels4(static_cast<uint32_t>(idx >> 32))) << 32;
}

__device__ __forceinline__ uint64_t mxfp4_grid8(uint64_t idx) {
  const auto four = [](uint32_t i) {
    return grid_levels4(i, kMxfp4Word0, kMxfp4Word1, kMxfp4Word2, kMxfp4Word3);
  };
  return static_cast<uint64_t>(four(static_cast<uint32_t>(idx))) |
         static_cast<uint64_t>(four(static_cast<uint32_t>(idx >> 32))) << 32;
}

// Each block type's struct (quant/blocks.h), its elements and its bytes.
template <DType T>
struct BlockTraits;
template <>
struct BlockTraits<DType::Q4_0> {
  using Block = BlockQ4_0;
  static constexpr int kElems = kQK32, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::Q4_1> {
  using Block = BlockQ4_1;
  static constexpr int kElems = kQK32, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::Q5_0> {
  using Block = BlockQ5_0;
  static constexpr int kElems = kQK32, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::Q5_1> {
  using Block = BlockQ5_1;
  static constexpr int kElems = kQK32, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::Q8_0> {
  using Block = BlockQ8_0;
  static constexpr int kElems = kQK32, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::Q2_K> {
  using Block = BlockQ2_K;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::Q3_K> {
  using Block = BlockQ3_K;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::Q4_K> {
  using Block = BlockQ4_K;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::Q5_K> {
  using Block = BlockQ5_K;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::Q6_K> {
  using Block = BlockQ6_K;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::IQ4_NL> {
  using Block = BlockIQ4_NL;
  static constexpr int kElems = kQK32, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::IQ4_XS> {
  using Block = BlockIQ4_XS;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
// 17 bytes: MXFP4's blocks lie at any address, so its kernels read them a byte at a time.
template <>
struct BlockTraits<DType::MXFP4> {
  using Block = BlockMXFP4;
  static constexpr int kElems = kQK32, kBytes = sizeof(Block);
};

// Elements i0 .. i0 + 7 of the block at `b` (i0 a multiple of 8) into y.
template <DType T>
__device__ __forceinline__ void dequant8(const uint8_t* b, int i0, float* y);

template <>
__device__ __forceinline__ void dequant8<DType::Q8_0>(const uint8_t* b, int i0, float* y) {
  const float d = half_bits_to_float(load_u16(b));
  const uint64_t q = load8_bytes(b + 2 + i0);
#pragma unroll
  for (int k = 0; k < 8; ++k) y[k] = static_cast<float>(static_cast<int8_t>(byte_of(q, k))) * d;
}

// Nibble bytes of a 32-element block: element i < 16 is the low nibble of qs[i], else the high
// nibble of qs[i - 16].
__device__ __forceinline__ void nibbles8(const uint8_t* qs, int i0, int* q) {
  const int shift = i0 < 16 ? 0 : 4;
  const uint64_t v = load8_bytes(qs + (i0 & 15));
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k] = (byte_of(v, k) >> shift) & 0x0F;
}

template <>
__device__ __forceinline__ void dequant8<DType::Q4_0>(const uint8_t* b, int i0, float* y) {
  const float d = half_bits_to_float(load_u16(b));
  int q[8];
  nibbles8(b + 2, i0, q);
#pragma unroll
  for (int k = 0; k < 8; ++k) y[k] = d * static_cast<float>(q[k] - 8);
}

template <>
__device__ __forceinline__ void dequant8<DType::Q4_1>(const uint8_t* b, int i0, float* y) {
  const float d = half_bits_to_float(load_u16(b));
  const float m = half_bits_to_float(load_u16(b + 2));
  int q[8];
  nibbles8(b + 4, i0, q);
#pragma unroll
  for (int k = 0; k < 8; ++k) y[k] = d * static_cast<float>(q[k]) + m;
}

__device__ __forceinline__ uint32_t load_u32_2aligned(const uint8_t* p) {
  return static_cast<uint32_t>(load_u16(p)) | static_cast<uint32_t>(load_u16(p + 2)) << 16;
}

template <>
__device__ __forceinline__ void dequant8<DType::Q5_0>(const uint8_t* b, int i0, float* y) {
  const float d = half_bits_to_float(load_u16(b));
  const uint32_t qh = load_u32_2aligned(b + 2);
  int q[8];
  nibbles8(b + 6, i0, q);
#pragma unroll
  for (int k = 0; k < 8; ++k)
    y[k] = d * static_cast<float>((q[k] | static_cast<int>(((qh >> (i0 + k)) & 1) << 4)) - 16);
}

template <>
__device__ __forceinline__ void dequant8<DType::Q5_1>(const uint8_t* b, int i0, float* y) {
  const float d = half_bits_to_float(load_u16(b));
  const float m = half_bits_to_float(load_u16(b + 2));
  const uint32_t qh = load_u32_2aligned(b + 4);
  int q[8];
  nibbles8(b + 8, i0, q);
#pragma unroll
  for (int k = 0; k < 8; ++k)
    y[k] = d * static_cast<float>(q[k] | static_cast<int>(((qh >> (i0 + k)) & 1) << 4)) + m;
}

template <>
__device__ __forceinline__ void dequant8<DType::Q2_K>(const uint8_t* b, int i0, float* y) {
  const auto* blk = reinterpret_cast<const BlockQ2_K*>(b);
  const float d = half_bits_to_float(blk->d);
  const float dmin = half_bits_to_float(blk->dmin);
  const int h = i0 / 128, s = (i0 / 32) % 4, l0 = i0 % 32, j = i0 / 16;
  const float dl = d * static_cast<float>(blk->scales[j] & 0x0F);
  const float ml = dmin * static_cast<float>(blk->scales[j] >> 4);
  const uint64_t v = load8_bytes(blk->qs + 32 * h + l0);
#pragma unroll
  for (int k = 0; k < 8; ++k) y[k] = dl * static_cast<float>((byte_of(v, k) >> (2 * s)) & 3) - ml;
}

template <>
__device__ __forceinline__ void dequant8<DType::Q3_K>(const uint8_t* b, int i0, float* y) {
  const auto* blk = reinterpret_cast<const BlockQ3_K*>(b);
  const float d = half_bits_to_float(blk->d);
  const int c = i0 / 32, l0 = i0 % 32;
  const float dl = d * static_cast<float>(q3k_scale_dev(blk->scales, i0 / 16));
  const uint64_t low = load8_bytes(blk->qs + 32 * (c / 4) + l0);
  const uint64_t high = load8_bytes(blk->hmask + l0);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int lo = (byte_of(low, k) >> (2 * (c % 4))) & 3;
    const int hi = (byte_of(high, k) >> c) & 1;
    y[k] = dl * static_cast<float>(lo - (hi ? 0 : 4));
  }
}

template <>
__device__ __forceinline__ void dequant8<DType::Q4_K>(const uint8_t* b, int i0, float* y) {
  const auto* blk = reinterpret_cast<const BlockQ4_K*>(b);
  const float d = half_bits_to_float(blk->d);
  const float dmin = half_bits_to_float(blk->dmin);
  const int c = i0 / 64, n = (i0 / 32) % 2, l0 = i0 % 32;
  float scale, min;
  k4_scale_min_dev(blk->scales, i0 / 32, scale, min);
  const float ds = d * scale, dm = dmin * min;
  const uint64_t v = load8_bytes(blk->qs + 32 * c + l0);
#pragma unroll
  for (int k = 0; k < 8; ++k)
    y[k] = ds * static_cast<float>((byte_of(v, k) >> (4 * n)) & 0x0F) - dm;
}

template <>
__device__ __forceinline__ void dequant8<DType::Q5_K>(const uint8_t* b, int i0, float* y) {
  const auto* blk = reinterpret_cast<const BlockQ5_K*>(b);
  const float d = half_bits_to_float(blk->d);
  const float dmin = half_bits_to_float(blk->dmin);
  const int c = i0 / 64, n = (i0 / 32) % 2, l0 = i0 % 32, sub = i0 / 32;
  float scale, min;
  k4_scale_min_dev(blk->scales, sub, scale, min);
  const float ds = d * scale, dm = dmin * min;
  const uint64_t v = load8_bytes(blk->qs + 32 * c + l0);
  const uint64_t hb = load8_bytes(blk->qh + l0);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int q = ((byte_of(v, k) >> (4 * n)) & 0x0F) | (((byte_of(hb, k) >> sub) & 1) << 4);
    y[k] = ds * static_cast<float>(q) - dm;
  }
}

// Elements i0 .. i0 + 7 (i0 a multiple of 8) of a q6_k block whose ql, qh and scales are at
// `body` (BlockQ6_K's offsets) and whose d is `d`: the file's block, or a packed row's
// (WeightLayout::Q6Rows), where d lies apart.
__device__ __forceinline__ void q6k_dequant8(const uint8_t* body, uint16_t d, int i0, float* y) {
  const auto* blk = reinterpret_cast<const BlockQ6_K*>(body);
  const int h = i0 / 128, r = i0 % 128;
  const float dl = half_bits_to_float(d) * static_cast<float>(blk->scales[i0 / 16]);
  const uint64_t low = load8_bytes(blk->ql + 64 * h + r % 64);
  const uint64_t high = load8_bytes(blk->qh + 32 * h + r % 32);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int lo = (byte_of(low, k) >> (4 * (r / 64))) & 0x0F;
    const int hi = (byte_of(high, k) >> (2 * (r / 32))) & 3;
    y[k] = dl * static_cast<float>((lo | (hi << 4)) - 32);
  }
}

template <>
__device__ __forceinline__ void dequant8<DType::Q6_K>(const uint8_t* b, int i0, float* y) {
  q6k_dequant8(b, reinterpret_cast<const BlockQ6_K*>(b)->d, i0, y);
}

// Nibbles of a 32-element block (low nibbles for i0 < 16, else high), one per byte.
__device__ __forceinline__ uint64_t nibble_bytes(const uint8_t* qs, int i0) {
  const uint64_t v = load8_bytes(qs + (i0 & 15));
  return (i0 < 16 ? v : v >> 4) & 0x0F0F0F0F0F0F0F0Full;
}

// Elements i0 .. i0 + 7 of 32 iq4 indices at qs, as step * level.
__device__ __forceinline__ void iq4_dequant8(const uint8_t* qs, int i0, float step, float* y) {
  const uint64_t levels = iq4_levels8(nibble_bytes(qs, i0));
#pragma unroll
  for (int k = 0; k < 8; ++k)
    y[k] = step * static_cast<float>(static_cast<int8_t>(byte_of(levels, k)));
}

template <>
__device__ __forceinline__ void dequant8<DType::IQ4_NL>(const uint8_t* b, int i0, float* y) {
  iq4_dequant8(b + offsetof(BlockIQ4_NL, qs), i0, half_bits_to_float(load_u16(b)), y);
}

template <>
__device__ __forceinline__ void dequant8<DType::IQ4_XS>(const uint8_t* b, int i0, float* y) {
  const auto* blk = reinterpret_cast<const BlockIQ4_XS*>(b);
  const int j = i0 / 32;
  const float dl = half_bits_to_float(blk->d) * static_cast<float>(iq4xs_scale_dev(blk, j));
  iq4_dequant8(blk->qs + 16 * j, i0 % 32, dl, y);
}

// Eight bytes at any address, one byte load each (little-endian).
__device__ __forceinline__ uint64_t load8_bytes_unaligned(const uint8_t* p) {
  uint64_t v = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) v |= static_cast<uint64_t>(p[k]) << (8 * k);
  return v;
}

// Elements i0 .. i0 + 7 of an MXFP4 block's 32 nibbles (as nibble_bytes), the doubled e2m1 values
// as int8 bytes.
__device__ __forceinline__ uint64_t mxfp4_levels8(const uint8_t* b, int i0) {
  const uint64_t v = load8_bytes_unaligned(b + offsetof(BlockMXFP4, qs) + (i0 & 15));
  return mxfp4_grid8((i0 < 16 ? v : v >> 4) & 0x0F0F0F0F0F0F0F0Full);
}

// Half the block's e8m0 scale, 2^(e - 128), exactly as mxfp4_half_scale (quant/blocks.h).
__device__ __forceinline__ float mxfp4_half_scale_dev(uint8_t e) {
  return __uint_as_float(e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23);
}

template <>
__device__ __forceinline__ void dequant8<DType::MXFP4>(const uint8_t* b, int i0, float* y) {
  const float d = mxfp4_half_scale_dev(b[offsetof(BlockMXFP4, e)]);
  const uint64_t levels = mxfp4_levels8(b, i0);
#pragma unroll
  for (int k = 0; k < 8; ++k)
    y[k] = d * static_cast<float>(static_cast<int8_t>(byte_of(levels, k)));
}

// ---- GEMV dot products ----
// dot8<T>(block, i0, x) = sum over k < 8 of element i0 + k of the block times x[k]. The scales are
// factored out of the sum (d * sum(q x) - dmin * min * sum(x)), and the small integers become
// floats by the exponent trick (the bits 0x4B0000qq are the float 2^23 + qq, exactly) instead of
// the quarter-rate integer conversion: one byte permute, one add and one FMA per element.

constexpr float kTwo23 = 8388608.0f;

// Sum over the four bytes q_k of w of (q_k - bias) * x[k]; every q_k - bias is exact.
__device__ __forceinline__ float dot4_bytes(uint32_t w, float bias, const float* x) {
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float q = __int_as_float(static_cast<int>(__byte_perm(w, 0x4B000000u, 0x7440u + k)));
    s = fmaf(q - (kTwo23 + bias), x[k], s);
  }
  return s;
}

__device__ __forceinline__ float dot8_words(uint64_t v, float bias, const float* x) {
  return dot4_bytes(static_cast<uint32_t>(v), bias, x) +
         dot4_bytes(static_cast<uint32_t>(v >> 32), bias, x + 4);
}

__device__ __forceinline__ float sum8(const float* x) {
  return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
}

// Bits i0 .. i0 + 7 of qh, one per byte, moved to bit 4 of each byte.
__device__ __forceinline__ uint64_t fifth_bits(uint32_t qh, int i0) {
  const uint32_t b = (qh >> i0) & 0xFF;
  uint64_t spread = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) spread |= static_cast<uint64_t>((b >> k) & 1) << (8 * k + 4);
  return spread;
}

template <DType T>
__device__ __forceinline__ float dot8(const uint8_t* b, int i0, const float* x);

template <>
__device__ __forceinline__ float dot8<DType::Q8_0>(const uint8_t* b, int i0, const float* x) {
  // Signed bytes: flipping the sign bit gives q + 128.
  const uint64_t v = load8_bytes(b + 2 + i0) ^ 0x8080808080808080ull;
  return half_bits_to_float(load_u16(b)) * dot8_words(v, 128.0f, x);
}

template <>
__device__ __forceinline__ float dot8<DType::Q4_0>(const uint8_t* b, int i0, const float* x) {
  return half_bits_to_float(load_u16(b)) * dot8_words(nibble_bytes(b + 2, i0), 8.0f, x);
}

template <>
__device__ __forceinline__ float dot8<DType::Q4_1>(const uint8_t* b, int i0, const float* x) {
  return half_bits_to_float(load_u16(b)) * dot8_words(nibble_bytes(b + 4, i0), 0.0f, x) +
         half_bits_to_float(load_u16(b + 2)) * sum8(x);
}

template <>
__device__ __forceinline__ float dot8<DType::Q5_0>(const uint8_t* b, int i0, const float* x) {
  const uint64_t q = nibble_bytes(b + 6, i0) | fifth_bits(load_u32_2aligned(b + 2), i0);
  return half_bits_to_float(load_u16(b)) * dot8_words(q, 16.0f, x);
}

template <>
__device__ __forceinline__ float dot8<DType::Q5_1>(const uint8_t* b, int i0, const float* x) {
  const uint64_t q = nibble_bytes(b + 8, i0) | fifth_bits(load_u32_2aligned(b + 4), i0);
  return half_bits_to_float(load_u16(b)) * dot8_words(q, 0.0f, x) +
         half_bits_to_float(load_u16(b + 2)) * sum8(x);
}

template <>
__device__ __forceinline__ float dot8<DType::Q2_K>(const uint8_t* b, int i0, const float* x) {
  const auto* blk = reinterpret_cast<const BlockQ2_K*>(b);
  const int h = i0 / 128, s = (i0 / 32) % 4, l0 = i0 % 32, j = i0 / 16;
  const float dl = half_bits_to_float(blk->d) * static_cast<float>(blk->scales[j] & 0x0F);
  const float ml = half_bits_to_float(blk->dmin) * static_cast<float>(blk->scales[j] >> 4);
  const uint64_t q = (load8_bytes(blk->qs + 32 * h + l0) >> (2 * s)) & 0x0303030303030303ull;
  return dl * dot8_words(q, 0.0f, x) - ml * sum8(x);
}

template <>
__device__ __forceinline__ float dot8<DType::Q3_K>(const uint8_t* b, int i0, const float* x) {
  const auto* blk = reinterpret_cast<const BlockQ3_K*>(b);
  const int c = i0 / 32, l0 = i0 % 32;
  const float dl =
      half_bits_to_float(blk->d) * static_cast<float>(q3k_scale_dev(blk->scales, i0 / 16));
  const uint64_t low =
      (load8_bytes(blk->qs + 32 * (c / 4) + l0) >> (2 * (c % 4))) & 0x0303030303030303ull;
  const uint64_t high = (load8_bytes(blk->hmask + l0) >> c) & 0x0101010101010101ull;
  // q = low - (high ? 0 : 4) = (low + 4 high) - 4.
  return dl * dot8_words(low | (high << 2), 4.0f, x);
}

template <>
__device__ __forceinline__ float dot8<DType::Q4_K>(const uint8_t* b, int i0, const float* x) {
  const auto* blk = reinterpret_cast<const BlockQ4_K*>(b);
  const int c = i0 / 64, n = (i0 / 32) % 2, l0 = i0 % 32;
  float scale, min;
  k4_scale_min_dev(blk->scales, i0 / 32, scale, min);
  const uint64_t q = (load8_bytes(blk->qs + 32 * c + l0) >> (4 * n)) & 0x0F0F0F0F0F0F0F0Full;
  return half_bits_to_float(blk->d) * scale * dot8_words(q, 0.0f, x) -
         half_bits_to_float(blk->dmin) * min * sum8(x);
}

template <>
__device__ __forceinline__ float dot8<DType::Q5_K>(const uint8_t* b, int i0, const float* x) {
  const auto* blk = reinterpret_cast<const BlockQ5_K*>(b);
  const int c = i0 / 64, n = (i0 / 32) % 2, l0 = i0 % 32, sub = i0 / 32;
  float scale, min;
  k4_scale_min_dev(blk->scales, sub, scale, min);
  const uint64_t nib = (load8_bytes(blk->qs + 32 * c + l0) >> (4 * n)) & 0x0F0F0F0F0F0F0F0Full;
  const uint64_t hi = ((load8_bytes(blk->qh + l0) >> sub) & 0x0101010101010101ull) << 4;
  return half_bits_to_float(blk->d) * scale * dot8_words(nib | hi, 0.0f, x) -
         half_bits_to_float(blk->dmin) * min * sum8(x);
}

template <>
__device__ __forceinline__ float dot8<DType::Q6_K>(const uint8_t* b, int i0, const float* x) {
  const auto* blk = reinterpret_cast<const BlockQ6_K*>(b);
  const int h = i0 / 128, r = i0 % 128;
  const float dl = half_bits_to_float(blk->d) * static_cast<float>(blk->scales[i0 / 16]);
  const uint64_t low =
      (load8_bytes(blk->ql + 64 * h + r % 64) >> (4 * (r / 64))) & 0x0F0F0F0F0F0F0F0Full;
  const uint64_t high =
      (load8_bytes(blk->qh + 32 * h + r % 32) >> (2 * (r / 32))) & 0x0303030303030303ull;
  return dl * dot8_words(low | (high << 4), 32.0f, x);
}

// Signed levels, as q8_0's values: flipping the sign bit gives level + 128.
template <>
__device__ __forceinline__ float dot8<DType::IQ4_NL>(const uint8_t* b, int i0, const float* x) {
  const uint64_t v = iq4_levels8(nibble_bytes(b + offsetof(BlockIQ4_NL, qs), i0));
  return half_bits_to_float(load_u16(b)) * dot8_words(v ^ 0x8080808080808080ull, 128.0f, x);
}

template <>
__device__ __forceinline__ float dot8<DType::IQ4_XS>(const uint8_t* b, int i0, const float* x) {
  const auto* blk = reinterpret_cast<const BlockIQ4_XS*>(b);
  const int j = i0 / 32;
  const float dl = half_bits_to_float(blk->d) * static_cast<float>(iq4xs_scale_dev(blk, j));
  const uint64_t v = iq4_levels8(nibble_bytes(blk->qs + 16 * j, i0 % 32));
  return dl * dot8_words(v ^ 0x8080808080808080ull, 128.0f, x);
}

template <>
__device__ __forceinline__ float dot8<DType::MXFP4>(const uint8_t* b, int i0, const float* x) {
  const float d = mxfp4_half_scale_dev(b[offsetof(BlockMXFP4, e)]);
  return d * dot8_words(mxfp4_levels8(b, i0) ^ 0x8080808080808080ull, 128.0f, x);
}

}  // namespace ts::cuda

// The low-bit types' traits, dequant8 and dot8 (specialisations of the templates above).
#include "backend/cuda/lowbit_device.cuh"

namespace ts::cuda {

// Element e of a row of a plain (unquantised) type.
template <DType T>
__device__ __forceinline__ float plain_elem(const uint8_t* row, int64_t e) {
  if constexpr (T == DType::F32) {
    return reinterpret_cast<const float*>(row)[e];
  } else if constexpr (T == DType::F16) {
    return half_bits_to_float(reinterpret_cast<const uint16_t*>(row)[e]);
  } else {
    static_assert(T == DType::BF16);
    return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[e]);
  }
}

// Calls f.template operator()<T>() with the weight type as a compile-time constant; false when
// the type has no kernel.
template <class F>
bool dispatch_weight_type(DType t, F&& f) {
  switch (t) {
    case DType::F32:
      f.template operator()<DType::F32>();
      return true;
    case DType::F16:
      f.template operator()<DType::F16>();
      return true;
    case DType::BF16:
      f.template operator()<DType::BF16>();
      return true;
    case DType::Q4_0:
      f.template operator()<DType::Q4_0>();
      return true;
    case DType::Q4_1:
      f.template operator()<DType::Q4_1>();
      return true;
    case DType::Q5_0:
      f.template operator()<DType::Q5_0>();
      return true;
    case DType::Q5_1:
      f.template operator()<DType::Q5_1>();
      return true;
    case DType::Q8_0:
      f.template operator()<DType::Q8_0>();
      return true;
    case DType::Q2_K:
      f.template operator()<DType::Q2_K>();
      return true;
    case DType::Q3_K:
      f.template operator()<DType::Q3_K>();
      return true;
    case DType::Q4_K:
      f.template operator()<DType::Q4_K>();
      return true;
    case DType::Q5_K:
      f.template operator()<DType::Q5_K>();
      return true;
    case DType::Q6_K:
      f.template operator()<DType::Q6_K>();
      return true;
    case DType::IQ4_NL:
      f.template operator()<DType::IQ4_NL>();
      return true;
    case DType::IQ4_XS:
      f.template operator()<DType::IQ4_XS>();
      return true;
    case DType::MXFP4:
      f.template operator()<DType::MXFP4>();
      return true;
    case DType::IQ2_XXS:
      f.template operator()<DType::IQ2_XXS>();
      return true;
    case DType::IQ2_XS:
      f.template operator()<DType::IQ2_XS>();
      return true;
    case DType::IQ2_S:
      f.template operator()<DType::IQ2_S>();
      return true;
    case DType::IQ3_XXS:
      f.template operator()<DType::IQ3_XXS>();
      return true;
    case DType::IQ3_S:
      f.template operator()<DType::IQ3_S>();
      return true;
    case DType::IQ1_S:
      f.template operator()<DType::IQ1_S>();
      return true;
    case DType::IQ1_M:
      f.template operator()<DType::IQ1_M>();
      return true;
    case DType::TQ1_0:
      f.template operator()<DType::TQ1_0>();
      return true;
    case DType::TQ2_0:
      f.template operator()<DType::TQ2_0>();
      return true;
    default:
      return false;
  }
}

__host__ __device__ constexpr bool is_plain(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

}  // namespace ts::cuda
