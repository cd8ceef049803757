// Device-side decoding of the low-bit types (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s,
// iq1_m, tq1_0, tq2_0): dequant8 and dot8 as for the other block formats (quant_device.cuh, which
// includes this file), with the codebooks as device tables made from the same generated values
// as the host's (quant/iq_grids.h). Eight consecutive elements i0 .. i0 + 7 (i0 a multiple of 8)
// are one group of a grid entry (two entries of 4 for the i3 grids), so a thread reads one index,
// one sign byte and one scale. The operations follow quant/dequant.cpp in order, so the results
// are the reference's bit for bit; dot8 decodes, then sums the products (written for correctness
// first, not speed).
#pragma once

#include <cstdint>

#include "quant/blocks.h"
#include "quant/iq_grids.h"

namespace ts::cuda {

// Global memory, not __constant__: the threads of a warp read different entries, which the
// constant cache would serialise.
__device__ const uint8_t kDevIqSigns[128] = {TS_IQ_SIGNS_VALUES};
__device__ const uint64_t kDevIq2xxsGrid[256] = {TS_IQ2XXSGRID_VALUES};
__device__ const uint64_t kDevIq2xsGrid[512] = {TS_IQ2XSGRID_VALUES};
__device__ const uint64_t kDevIq2sGrid[1024] = {TS_IQ2SGRID_VALUES};
__device__ const uint32_t kDevIq3xxsGrid[256] = {TS_IQ3XXSGRID_VALUES};
__device__ const uint32_t kDevIq3sGrid[512] = {TS_IQ3SGRID_VALUES};
__device__ const uint64_t kDevIq1sGrid[2048] = {TS_IQ1SGRID_VALUES};

// A u32 at a 2-byte aligned address (block fields are only 2-byte aligned).
__device__ __forceinline__ uint32_t lowbit_load_u32(const uint8_t* p) {
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(h[0]) | static_cast<uint32_t>(h[1]) << 16;
}

__device__ __forceinline__ float lowbit_half(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(p)));
}

// y[k] = sign_k(scale * grid byte k), sign_k from bit k of `signs`.
__device__ __forceinline__ void lowbit_signed8(float scale, uint64_t grid, uint32_t signs,
                                               float* y) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float v = scale * static_cast<float>((grid >> (8 * k)) & 0xFF);
    y[k] = (signs >> k) & 1 ? -v : v;
  }
}

// The scale of group g (of 8) of iq2_xs / iq2_s: 4 bits per 16 elements.
__device__ __forceinline__ float lowbit_iq2_scale(const uint8_t* scales, int g, float d) {
  const int s = (scales[g / 4] >> (4 * ((g / 2) % 2))) & 0x0F;
  return d * (0.5f + static_cast<float>(s)) * 0.25f;
}

template <>
struct BlockTraits<DType::IQ2_XXS> {
  using Block = BlockIQ2_XXS;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::IQ2_XS> {
  using Block = BlockIQ2_XS;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::IQ2_S> {
  using Block = BlockIQ2_S;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::IQ3_XXS> {
  using Block = BlockIQ3_XXS;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::IQ3_S> {
  using Block = BlockIQ3_S;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::IQ1_S> {
  using Block = BlockIQ1_S;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::IQ1_M> {
  using Block = BlockIQ1_M;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::TQ1_0> {
  using Block = BlockTQ1_0;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};
template <>
struct BlockTraits<DType::TQ2_0> {
  using Block = BlockTQ2_0;
  static constexpr int kElems = kQKK, kBytes = sizeof(Block);
};

template <>
__device__ __forceinline__ void dequant8<DType::IQ2_XXS>(const uint8_t* b, int i0, float* y) {
  const int g = i0 / 8, ib = g / 4, l = g % 4;
  const uint8_t* qs = b + offsetof(BlockIQ2_XXS, qs) + 8 * ib;
  const uint32_t aux0 = lowbit_load_u32(qs), aux1 = lowbit_load_u32(qs + 4);
  const float db = lowbit_half(b) * (0.5f + static_cast<float>(aux1 >> 28)) * 0.25f;
  lowbit_signed8(db, kDevIq2xxsGrid[(aux0 >> (8 * l)) & 0xFF], kDevIqSigns[(aux1 >> (7 * l)) & 127],
                 y);
}

template <>
__device__ __forceinline__ void dequant8<DType::IQ2_XS>(const uint8_t* b, int i0, float* y) {
  const int g = i0 / 8;
  const auto* blk = reinterpret_cast<const BlockIQ2_XS*>(b);
  const uint16_t q = blk->qs[g];
  lowbit_signed8(lowbit_iq2_scale(blk->scales, g, lowbit_half(b)), kDevIq2xsGrid[q & 511],
                 kDevIqSigns[q >> 9], y);
}

template <>
__device__ __forceinline__ void dequant8<DType::IQ2_S>(const uint8_t* b, int i0, float* y) {
  const int g = i0 / 8;
  const auto* blk = reinterpret_cast<const BlockIQ2_S*>(b);
  const int index = blk->qs[g] | (((blk->qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
  lowbit_signed8(lowbit_iq2_scale(blk->scales, g, lowbit_half(b)), kDevIq2sGrid[index],
                 blk->qs[kQKK / 8 + g], y);
}

template <>
__device__ __forceinline__ void dequant8<DType::IQ3_XXS>(const uint8_t* b, int i0, float* y) {
  const int g = i0 / 8, ib = g / 4, l = g % 4;
  const auto* blk = reinterpret_cast<const BlockIQ3_XXS*>(b);
  const uint32_t aux = lowbit_load_u32(blk->qs + kQKK / 4 + 4 * ib);
  const float db = lowbit_half(b) * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
  const uint8_t* q = blk->qs + 8 * ib + 2 * l;
  const uint64_t grid = static_cast<uint64_t>(kDevIq3xxsGrid[q[0]]) |
                        static_cast<uint64_t>(kDevIq3xxsGrid[q[1]]) << 32;
  lowbit_signed8(db, grid, kDevIqSigns[(aux >> (7 * l)) & 127], y);
}

template <>
__device__ __forceinline__ void dequant8<DType::IQ3_S>(const uint8_t* b, int i0, float* y) {
  const int g = i0 / 8;
  const auto* blk = reinterpret_cast<const BlockIQ3_S*>(b);
  const int s = (blk->scales[g / 8] >> (4 * ((g / 4) % 2))) & 0x0F;
  const float db = lowbit_half(b) * static_cast<float>(1 + 2 * s);
  const int i = 2 * g;
  const int index0 = blk->qs[i] | (((blk->qh[i / 8] >> (i % 8)) & 1) << 8);
  const int index1 = blk->qs[i + 1] | (((blk->qh[(i + 1) / 8] >> ((i + 1) % 8)) & 1) << 8);
  const uint64_t grid = static_cast<uint64_t>(kDevIq3sGrid[index0]) |
                        static_cast<uint64_t>(kDevIq3sGrid[index1]) << 32;
  lowbit_signed8(db, grid, blk->signs[g], y);
}

// y[k] = dl * (grid value k + delta), the i1 grid's bytes signed (-1, 0, 1).
__device__ __forceinline__ void lowbit_iq1_8(float dl, uint64_t grid, float delta, float* y) {
#pragma unroll
  for (int k = 0; k < 8; ++k)
    y[k] = dl * (static_cast<float>(static_cast<int8_t>((grid >> (8 * k)) & 0xFF)) + delta);
}

template <>
__device__ __forceinline__ void dequant8<DType::IQ1_S>(const uint8_t* b, int i0, float* y) {
  const int g = i0 / 8, ib = g / 4, l = g % 4;
  const auto* blk = reinterpret_cast<const BlockIQ1_S*>(b);
  const int qh = blk->qh[ib];
  const float dl = lowbit_half(b) * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
  const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
  lowbit_iq1_8(dl, kDevIq1sGrid[blk->qs[g] | (((qh >> (3 * l)) & 7) << 8)], delta, y);
}

template <>
__device__ __forceinline__ void dequant8<DType::IQ1_M>(const uint8_t* b, int i0, float* y) {
  const int g = i0 / 8, k = g / 2;
  const auto* blk = reinterpret_cast<const BlockIQ1_M*>(b);
  const auto* sc = reinterpret_cast<const uint16_t*>(blk->scales);
  const auto d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                            ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  const float d = __half2float(__ushort_as_half(d_bits));
  const int s = (sc[k / 4] >> (3 * (k % 4))) & 7;
  const float dl = d * static_cast<float>(2 * s + 1);
  const int nib = (blk->qh[g / 2] >> (4 * (g % 2))) & 0x0F;
  lowbit_iq1_8(dl, kDevIq1sGrid[blk->qs[g] | ((nib & 7) << 8)], nib & 8 ? -kIq1Delta : kIq1Delta,
               y);
}

// Trit n of byte q of tq1_0: ((u8)(q * 3^n) * 3) >> 8.
__device__ __forceinline__ int lowbit_trit(int q, int n) {
  const int pow3 = n == 0 ? 1 : n == 1 ? 3 : n == 2 ? 9 : n == 3 ? 27 : 81;
  return (((q * pow3) & 0xFF) * 3) >> 8;
}

template <>
__device__ __forceinline__ void dequant8<DType::TQ1_0>(const uint8_t* b, int i0, float* y) {
  const auto* blk = reinterpret_cast<const BlockTQ1_0*>(b);
  const float d = lowbit_half(b + offsetof(BlockTQ1_0, d));
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int e = i0 + k;
    int t;
    if (e < 160)
      t = lowbit_trit(blk->qs[e % 32], e / 32);
    else if (e < 240)
      t = lowbit_trit(blk->qs[32 + (e - 160) % 16], (e - 160) / 16);
    else
      t = lowbit_trit(blk->qh[(e - 240) % 4], (e - 240) / 4);
    y[k] = d * static_cast<float>(t - 1);
  }
}

template <>
__device__ __forceinline__ void dequant8<DType::TQ2_0>(const uint8_t* b, int i0, float* y) {
  const auto* blk = reinterpret_cast<const BlockTQ2_0*>(b);
  const float d = lowbit_half(b + offsetof(BlockTQ2_0, d));
  const int h = i0 / 128, s = (i0 / 32) % 4, m0 = i0 % 32;
#pragma unroll
  for (int k = 0; k < 8; ++k)
    y[k] = d * static_cast<float>(((blk->qs[32 * h + m0 + k] >> (2 * s)) & 3) - 1);
}

// The GEMV's dot of eight elements: decoded as dequant8, then summed in order.
template <DType T>
__device__ __forceinline__ float lowbit_dot8(const uint8_t* b, int i0, const float* x) {
  float y[8];
  dequant8<T>(b, i0, y);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s = fmaf(y[k], x[k], s);
  return s;
}

template <>
__device__ __forceinline__ float dot8<DType::IQ2_XXS>(const uint8_t* b, int i0, const float* x) {
  return lowbit_dot8<DType::IQ2_XXS>(b, i0, x);
}
template <>
__device__ __forceinline__ float dot8<DType::IQ2_XS>(const uint8_t* b, int i0, const float* x) {
  return lowbit_dot8<DType::IQ2_XS>(b, i0, x);
}
template <>
__device__ __forceinline__ float dot8<DType::IQ2_S>(const uint8_t* b, int i0, const float* x) {
  return lowbit_dot8<DType::IQ2_S>(b, i0, x);
}
template <>
__device__ __forceinline__ float dot8<DType::IQ3_XXS>(const uint8_t* b, int i0, const float* x) {
  return lowbit_dot8<DType::IQ3_XXS>(b, i0, x);
}
template <>
__device__ __forceinline__ float dot8<DType::IQ3_S>(const uint8_t* b, int i0, const float* x) {
  return lowbit_dot8<DType::IQ3_S>(b, i0, x);
}
template <>
__device__ __forceinline__ float dot8<DType::IQ1_S>(const uint8_t* b, int i0, const float* x) {
  return lowbit_dot8<DType::IQ1_S>(b, i0, x);
}
template <>
__device__ __forceinline__ float dot8<DType::IQ1_M>(const uint8_t* b, int i0, const float* x) {
  return lowbit_dot8<DType::IQ1_M>(b, i0, x);
}
template <>
__device__ __forceinline__ float dot8<DType::TQ1_0>(const uint8_t* b, int i0, const float* x) {
  return lowbit_dot8<DType::TQ1_0>(b, i0, x);
}
template <>
__device__ __forceinline__ float dot8<DType::TQ2_0>(const uint8_t* b, int i0, const float* x) {
  return lowbit_dot8<DType::TQ2_0>(b, i0, x);
}

}  // namespace ts::cuda
