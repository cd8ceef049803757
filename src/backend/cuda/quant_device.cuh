// Device-side decoding of the GGML block formats of quant/blocks.h: eight consecutive elements of
// one block at a time (the unit the GEMV, dequantisation and embedding kernels give each thread).
// The operations follow quant/dequant.cpp in order, so that the results are the reference's bit
// for bit. Blocks must be 2-byte aligned (every block size and field offset is even); the backend
// checks this when a weight is uploaded.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// q4_k / q5_k sub-block scale and min (see k4_scale_min in quant/blocks.h).
__device__ __forceinline__ void k4_scale_min_dev(const uint8_t* s, int j, float& scale,
                                                 float& min) {
  if (j < 4) {
    scale = static_cast<float>(s[j] & 63);
    min = static_cast<float>(s[j + 4] & 63);
  } else {
    scale = static_cast<float>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    min = static_cast<float>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// q3_k signed sub-block scale (see q3k_scale in quant/blocks.h).
__device__ __forceinline__ int q3k_scale_dev(const uint8_t* s, int j) {
  const int lo = (s[j % 8] >> (4 * (j / 8))) & 0x0F;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 0x03;
  return (lo | (hi << 4)) - 32;
}

template <DType T>
struct BlockTraits;
template <>
struct BlockTraits<DType::Q4_0> {
  static constexpr int kElems = kQK32, kBytes = sizeof(BlockQ4_0);
};
template <>
struct BlockTraits<DType::Q4_1> {
  static constexpr int kElems = kQK32, kBytes = sizeof(BlockQ4_1);
};
template <>
struct BlockTraits<DType::Q5_0> {
  static constexpr int kElems = kQK32, kBytes = sizeof(BlockQ5_0);
};
template <>
struct BlockTraits<DType::Q5_1> {
  static constexpr int kElems = kQK32, kBytes = sizeof(BlockQ5_1);
};
template <>
struct BlockTraits<DType::Q8_0> {
  static constexpr int kElems = kQK32, kBytes = sizeof(BlockQ8_0);
};
template <>
struct BlockTraits<DType::Q2_K> {
  static constexpr int kElems = kQKK, kBytes = sizeof(BlockQ2_K);
};
template <>
struct BlockTraits<DType::Q3_K> {
  static constexpr int kElems = kQKK, kBytes = sizeof(BlockQ3_K);
};
template <>
struct BlockTraits<DType::Q4_K> {
  static constexpr int kElems = kQKK, kBytes = sizeof(BlockQ4_K);
};
template <>
struct BlockTraits<DType::Q5_K> {
  static constexpr int kElems = kQKK, kBytes = sizeof(BlockQ5_K);
};
template <>
struct BlockTraits<DType::Q6_K> {
  static constexpr int kElems = kQKK, kBytes = sizeof(BlockQ6_K);
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
    y[k] = d * static_cast<float>((q[k] | (((qh >> (i0 + k)) & 1) << 4)) - 16);
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
    y[k] = d * static_cast<float>(q[k] | (((qh >> (i0 + k)) & 1) << 4)) + m;
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

template <>
__device__ __forceinline__ void dequant8<DType::Q6_K>(const uint8_t* b, int i0, float* y) {
  const auto* blk = reinterpret_cast<const BlockQ6_K*>(b);
  const float d = half_bits_to_float(blk->d);
  const int h = i0 / 128, r = i0 % 128;
  const float dl = d * static_cast<float>(blk->scales[i0 / 16]);
  const uint64_t low = load8_bytes(blk->ql + 64 * h + r % 64);
  const uint64_t high = load8_bytes(blk->qh + 32 * h + r % 32);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int lo = (byte_of(low, k) >> (4 * (r / 64))) & 0x0F;
    const int hi = (byte_of(high, k) >> (2 * (r / 32))) & 3;
    y[k] = dl * static_cast<float>((lo | (hi << 4)) - 32);
  }
}

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
    default:
      return false;
  }
}

__host__ __device__ constexpr bool is_plain(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

}  // namespace ts::cuda
