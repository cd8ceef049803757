// Scalar matmul kernels: the reference the SIMD paths are tested against, and the path for CPUs
// without AVX2. The quantised kernels use the same integer arithmetic as the SIMD ones: each
// weight block is decoded to small integer codes with integer sub-block scales, dotted with the
// int8 activations exactly in int32, and scaled to float once per block.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"
#include "quant/dequant.h"
#include "quant/iq_grids.h"

namespace ts::cpu {
namespace {

// ---- float weights -------------------------------------------------------------------------

float load_weight(const float* w, int64_t k) {
  return w[k];
}
float load_weight(const uint16_t* w, int64_t k) {
  return f16_to_f32(w[k]);
}

struct Bf16Row {
  const uint16_t* p;
};
float load_weight(Bf16Row w, int64_t k) {
  return bf16_to_f32(w.p[k]);
}

// Four interleaved accumulators: the same summation shape as a short SIMD loop, plain FMA-able
// multiply-adds, no compensation.
template <class Row>
float dot_float(Row w, const float* x, int64_t K) {
  float acc[4] = {0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 4 <= K; k += 4)
    for (int u = 0; u < 4; ++u) acc[u] += load_weight(w, k + u) * x[k + u];
  for (; k < K; ++k) acc[0] += load_weight(w, k) * x[k];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

template <DType kType>
void rows_float(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + r * w.row_stride;
    for (int64_t m = 0; m < x.M; ++m) {
      const float* xm = x.f32 + m * x.K;
      float v;
      if constexpr (kType == DType::F32)
        v = dot_float(reinterpret_cast<const float*>(row), xm, x.K);
      else if constexpr (kType == DType::F16)
        v = dot_float(reinterpret_cast<const uint16_t*>(row), xm, x.K);
      else
        v = dot_float(Bf16Row{reinterpret_cast<const uint16_t*>(row)}, xm, x.K);
      y[m * ldy + r] = v;
    }
  }
}

// ---- 32-element blocks: value = d * (q - offset) + m ---------------------------------------

struct Decoded32 {
  int q[kQK32];
  float d;
  float m;  // added to every element (0 for the symmetric types)
  int offset;
};

int nibble(const uint8_t* qs, int i) {
  return i < 16 ? qs[i] & 0x0F : qs[i - 16] >> 4;
}

int fifth_bit(const uint8_t* qh, int i) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  return (bits >> i) & 1;
}

void decode(const BlockQ4_0& b, Decoded32& o) {
  for (int i = 0; i < kQK32; ++i) o.q[i] = nibble(b.qs, i);
  o.d = f16_to_f32(b.d), o.m = 0, o.offset = 8;
}

void decode(const BlockQ4_1& b, Decoded32& o) {
  for (int i = 0; i < kQK32; ++i) o.q[i] = nibble(b.qs, i);
  o.d = f16_to_f32(b.d), o.m = f16_to_f32(b.m), o.offset = 0;
}

void decode(const BlockQ5_0& b, Decoded32& o) {
  for (int i = 0; i < kQK32; ++i) o.q[i] = nibble(b.qs, i) | (fifth_bit(b.qh, i) << 4);
  o.d = f16_to_f32(b.d), o.m = 0, o.offset = 16;
}

void decode(const BlockQ5_1& b, Decoded32& o) {
  for (int i = 0; i < kQK32; ++i) o.q[i] = nibble(b.qs, i) | (fifth_bit(b.qh, i) << 4);
  o.d = f16_to_f32(b.d), o.m = f16_to_f32(b.m), o.offset = 0;
}

void decode(const BlockQ8_0& b, Decoded32& o) {
  for (int i = 0; i < kQK32; ++i) o.q[i] = b.qs[i];
  o.d = f16_to_f32(b.d), o.m = 0, o.offset = 0;
}

void decode(const BlockIQ4_NL& b, Decoded32& o) {
  for (int i = 0; i < kQK32; ++i) o.q[i] = kIq4Levels[nibble(b.qs, i)];
  o.d = f16_to_f32(b.d), o.m = 0, o.offset = 0;
}

// The doubled e2m1 values are integers, the halved e8m0 scale exact in f32.
void decode(const BlockMXFP4& b, Decoded32& o) {
  for (int i = 0; i < kQK32; ++i) o.q[i] = kMxfp4Doubled[nibble(b.qs, i)];
  o.d = mxfp4_half_scale(b.e), o.m = 0, o.offset = 0;
}

// sum_i (d (q_i - offset) + m) * dx * xq_i = d dx (sum q_i xq_i - offset sum xq) + m dx sum xq.
float block_dot(const Decoded32& w, const BlockQ8A32& x) {
  int32_t isum = 0;
  for (int i = 0; i < kQK32; ++i) isum += w.q[i] * x.qs[i];
  isum -= w.offset * x.sum;
  return w.d * x.d * static_cast<float>(isum) + w.m * (x.d * static_cast<float>(x.sum));
}

// ---- 256-element k-quant blocks: value = d * scale[j] * (q - offset) - dmin * min[j] ----------
// with j = e / 16 (the 32-element sub-blocks of q4_k / q5_k repeat their scale and min).

struct DecodedK {
  int q[kQKK];
  int scale[16];
  int min[16];
  float d;
  float dmin;
  int offset;
};

void decode(const BlockQ2_K& b, DecodedK& o) {
  for (int e = 0; e < kQKK; ++e)
    o.q[e] = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
  for (int j = 0; j < 16; ++j) o.scale[j] = b.scales[j] & 0x0F, o.min[j] = b.scales[j] >> 4;
  o.d = f16_to_f32(b.d), o.dmin = f16_to_f32(b.dmin), o.offset = 0;
}

void decode(const BlockQ3_K& b, DecodedK& o) {
  for (int e = 0; e < kQKK; ++e) {
    const int c = e / 32, l = e % 32;
    const int low = (b.qs[32 * (c / 4) + l] >> (2 * (c % 4))) & 3;
    o.q[e] = low | (((b.hmask[l] >> c) & 1) << 2);
  }
  for (int j = 0; j < 16; ++j) o.scale[j] = q3k_scale(b.scales, j), o.min[j] = 0;
  o.d = f16_to_f32(b.d), o.dmin = 0, o.offset = 4;
}

void k4_scales(const uint8_t* packed, DecodedK& o) {
  for (int j = 0; j < 8; ++j) {
    uint8_t scale, min;
    k4_scale_min(packed, j, scale, min);
    o.scale[2 * j] = o.scale[2 * j + 1] = scale;
    o.min[2 * j] = o.min[2 * j + 1] = min;
  }
}

void decode(const BlockQ4_K& b, DecodedK& o) {
  for (int e = 0; e < kQKK; ++e)
    o.q[e] = (b.qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 15;
  k4_scales(b.scales, o);
  o.d = f16_to_f32(b.d), o.dmin = f16_to_f32(b.dmin), o.offset = 0;
}

void decode(const BlockQ5_K& b, DecodedK& o) {
  for (int e = 0; e < kQKK; ++e) {
    const int low = (b.qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 15;
    o.q[e] = low | (((b.qh[e % 32] >> (e / 32)) & 1) << 4);
  }
  k4_scales(b.scales, o);
  o.d = f16_to_f32(b.d), o.dmin = f16_to_f32(b.dmin), o.offset = 0;
}

void decode(const BlockQ6_K& b, DecodedK& o) {
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, r = e % 128;
    const int low = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
    o.q[e] = low | (((b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3) << 4);
  }
  for (int j = 0; j < 16; ++j) o.scale[j] = b.scales[j], o.min[j] = 0;
  o.d = f16_to_f32(b.d), o.dmin = 0, o.offset = 32;
}

void decode(const BlockIQ4_XS& b, DecodedK& o) {
  for (int e = 0; e < kQKK; ++e)
    o.q[e] = kIq4Levels[nibble(b.qs + static_cast<size_t>(16 * (e / 32)), e % 32)];
  for (int j = 0; j < 16; ++j) o.scale[j] = iq4xs_scale(b, j / 2), o.min[j] = 0;
  o.d = f16_to_f32(b.d), o.dmin = 0, o.offset = 0;
}

// The low-bit types as signed integers (matmul_lowbit_x86_body.h gives the integer forms): group
// g of 8 elements takes byte j of its grid entry as element j, negated where bit j of its signs
// is set.
uint32_t le_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void set_group(DecodedK& o, int g, uint64_t grid, uint8_t signs) {
  for (int j = 0; j < 8; ++j) {
    const int v = static_cast<uint8_t>(grid >> (8 * j));
    o.q[8 * g + j] = (signs >> j) & 1 ? -v : v;
  }
}

void no_min(DecodedK& o, float d) {
  for (int j = 0; j < 16; ++j) o.min[j] = 0;
  o.d = d, o.dmin = 0, o.offset = 0;
}

void decode(const BlockIQ2_XXS& b, DecodedK& o) {
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t idx = le_u32(b.qs + 4 * ib), aux = le_u32(b.qs + 4 * ib + 2);
    for (int l = 0; l < 4; ++l)
      set_group(o, 4 * ib + l, kIq2xxsGrid[(idx >> (8 * l)) & 0xFF],
                kIqSigns[(aux >> (7 * l)) & 127]);
    o.scale[2 * ib] = o.scale[2 * ib + 1] = static_cast<int>(2 * (aux >> 28) + 1);
  }
  no_min(o, f16_to_f32(b.d) * 0.125f);
}

int iq2_scale16(const uint8_t* scales, int j) {
  return 2 * ((scales[j / 2] >> (4 * (j % 2))) & 0x0F) + 1;
}

void decode(const BlockIQ2_XS& b, DecodedK& o) {
  for (int g = 0; g < 32; ++g) set_group(o, g, kIq2xsGrid[b.qs[g] & 511], kIqSigns[b.qs[g] >> 9]);
  for (int j = 0; j < 16; ++j) o.scale[j] = iq2_scale16(b.scales, j);
  no_min(o, f16_to_f32(b.d) * 0.125f);
}

void decode(const BlockIQ2_S& b, DecodedK& o) {
  for (int g = 0; g < 32; ++g)
    set_group(o, g, kIq2sGrid[b.qs[g] | (((b.qh[g / 4] >> (2 * (g % 4))) & 3) << 8)],
              b.qs[kQKK / 8 + g]);
  for (int j = 0; j < 16; ++j) o.scale[j] = iq2_scale16(b.scales, j);
  no_min(o, f16_to_f32(b.d) * 0.125f);
}

// Two 4-value entries of an i3 grid as one group of 8.
uint64_t grid_pair(const uint32_t* grid, int i0, int i1) {
  return grid[i0] | static_cast<uint64_t>(grid[i1]) << 32;
}

void decode(const BlockIQ3_XXS& b, DecodedK& o) {
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t aux = le_u32(b.qs + kQKK / 4 + 4 * ib);
    for (int l = 0; l < 4; ++l) {
      const uint8_t* q = b.qs + 8 * ib + 2 * l;
      set_group(o, 4 * ib + l, grid_pair(kIq3xxsGrid, q[0], q[1]),
                kIqSigns[(aux >> (7 * l)) & 127]);
    }
    o.scale[2 * ib] = o.scale[2 * ib + 1] = static_cast<int>(2 * (aux >> 28) + 1);
  }
  no_min(o, f16_to_f32(b.d) * 0.25f);
}

void decode(const BlockIQ3_S& b, DecodedK& o) {
  for (int g = 0; g < 32; ++g) {
    const int i0 = 2 * g, i1 = 2 * g + 1;
    set_group(o, g,
              grid_pair(kIq3sGrid, b.qs[i0] | (((b.qh[i0 / 8] >> (i0 % 8)) & 1) << 8),
                        b.qs[i1] | (((b.qh[i1 / 8] >> (i1 % 8)) & 1) << 8)),
              b.signs[g]);
  }
  for (int j = 0; j < 16; ++j)
    o.scale[j] = 1 + 2 * ((b.scales[j / 4] >> (4 * ((j / 2) % 2))) & 0x0F);
  no_min(o, f16_to_f32(b.d));
}

// 8 grid + delta (delta +-1) for the i1 grid's bytes -1, 0, 1.
void set_iq1_group(DecodedK& o, int g, uint64_t grid, int delta) {
  for (int j = 0; j < 8; ++j) o.q[8 * g + j] = 8 * static_cast<int8_t>(grid >> (8 * j)) + delta;
}

void decode(const BlockIQ1_S& b, DecodedK& o) {
  for (int ib = 0; ib < 8; ++ib) {
    const int qh = b.qh[ib];
    for (int l = 0; l < 4; ++l)
      set_iq1_group(o, 4 * ib + l, kIq1sGrid[b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)],
                    qh & 0x8000 ? -1 : 1);
    o.scale[2 * ib] = o.scale[2 * ib + 1] = 2 * ((qh >> 12) & 7) + 1;
  }
  no_min(o, f16_to_f32(b.d) * 0.125f);
}

void decode(const BlockIQ1_M& b, DecodedK& o) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof(sc));
  const auto d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                            ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  for (int g = 0; g < 32; ++g) {
    const int nib = (b.qh[g / 2] >> (4 * (g % 2))) & 0x0F;
    set_iq1_group(o, g, kIq1sGrid[b.qs[g] | ((nib & 7) << 8)], nib & 8 ? -1 : 1);
  }
  for (int j = 0; j < 16; ++j) o.scale[j] = 2 * ((sc[j / 4] >> (3 * (j % 4))) & 7) + 1;
  no_min(o, f16_to_f32(d_bits) * 0.125f);
}

int trit(uint8_t q, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto shifted = static_cast<uint8_t>(q * kPow3[n]);
  return (shifted * 3) >> 8;
}

void decode(const BlockTQ1_0& b, DecodedK& o) {
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) o.q[32 * n + m] = trit(b.qs[m], n) - 1;
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m) o.q[160 + 16 * n + m] = trit(b.qs[32 + m], n) - 1;
  for (int n = 0; n < 4; ++n)
    for (int m = 0; m < 4; ++m) o.q[240 + 4 * n + m] = trit(b.qh[m], n) - 1;
  for (int j = 0; j < 16; ++j) o.scale[j] = 1;
  no_min(o, f16_to_f32(b.d));
}

void decode(const BlockTQ2_0& b, DecodedK& o) {
  for (int e = 0; e < kQKK; ++e)
    o.q[e] = ((b.qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3) - 1;
  for (int j = 0; j < 16; ++j) o.scale[j] = 1;
  no_min(o, f16_to_f32(b.d));
}

// d dx sum_j scale_j (sum_{i in j} q_i xq_i - offset bsum_j) - dmin dx sum_j min_j bsum_j.
float block_dot(const DecodedK& w, const BlockQ8K& x) {
  int32_t isum = 0, msum = 0;
  for (int j = 0; j < 16; ++j) {
    int32_t sub = 0;
    for (int i = 16 * j; i < 16 * j + 16; ++i) sub += w.q[i] * x.qs[i];
    isum += w.scale[j] * (sub - w.offset * x.bsums[j]);
    msum += w.min[j] * x.bsums[j];
  }
  return w.d * x.d * static_cast<float>(isum) - w.dmin * x.d * static_cast<float>(msum);
}

// Decodes each weight block once and applies it to every activation row.
template <class Block, class Decoded, class ActBlock>
void rows_quant(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                int64_t ldy) {
  constexpr int kElems = sizeof(Decoded::q) / sizeof(int);
  const int64_t nb = x.K / kElems;
  std::vector<float> acc(x.M);
  Decoded dq;
  for (int64_t r = r0; r < r1; ++r) {
    const auto* row = reinterpret_cast<const Block*>(w.data + r * w.row_stride);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t b = 0; b < nb; ++b) {
      decode(row[b], dq);
      for (int64_t m = 0; m < x.M; ++m) {
        const auto* xm = reinterpret_cast<const ActBlock*>(x.data.data() + m * x.row_bytes);
        acc[m] += block_dot(dq, xm[b]);
      }
    }
    for (int64_t m = 0; m < x.M; ++m) y[m * ldy + r] = acc[m];
  }
}

}  // namespace

RowsKernel scalar_kernel(DType t) {
  switch (t) {
    case DType::F32:
      return rows_float<DType::F32>;
    case DType::F16:
      return rows_float<DType::F16>;
    case DType::BF16:
      return rows_float<DType::BF16>;
    case DType::Q4_0:
      return rows_quant<BlockQ4_0, Decoded32, BlockQ8A32>;
    case DType::Q4_1:
      return rows_quant<BlockQ4_1, Decoded32, BlockQ8A32>;
    case DType::Q5_0:
      return rows_quant<BlockQ5_0, Decoded32, BlockQ8A32>;
    case DType::Q5_1:
      return rows_quant<BlockQ5_1, Decoded32, BlockQ8A32>;
    case DType::Q8_0:
      return rows_quant<BlockQ8_0, Decoded32, BlockQ8A32>;
    case DType::Q2_K:
      return rows_quant<BlockQ2_K, DecodedK, BlockQ8K>;
    case DType::Q3_K:
      return rows_quant<BlockQ3_K, DecodedK, BlockQ8K>;
    case DType::Q4_K:
      return rows_quant<BlockQ4_K, DecodedK, BlockQ8K>;
    case DType::Q5_K:
      return rows_quant<BlockQ5_K, DecodedK, BlockQ8K>;
    case DType::Q6_K:
      return rows_quant<BlockQ6_K, DecodedK, BlockQ8K>;
    case DType::IQ4_NL:
      return rows_quant<BlockIQ4_NL, Decoded32, BlockQ8A32>;
    case DType::MXFP4:
      return rows_quant<BlockMXFP4, Decoded32, BlockQ8A32>;
    case DType::IQ4_XS:
      return rows_quant<BlockIQ4_XS, DecodedK, BlockQ8K>;
    case DType::IQ2_XXS:
      return rows_quant<BlockIQ2_XXS, DecodedK, BlockQ8K>;
    case DType::IQ2_XS:
      return rows_quant<BlockIQ2_XS, DecodedK, BlockQ8K>;
    case DType::IQ2_S:
      return rows_quant<BlockIQ2_S, DecodedK, BlockQ8K>;
    case DType::IQ3_XXS:
      return rows_quant<BlockIQ3_XXS, DecodedK, BlockQ8K>;
    case DType::IQ3_S:
      return rows_quant<BlockIQ3_S, DecodedK, BlockQ8K>;
    case DType::IQ1_S:
      return rows_quant<BlockIQ1_S, DecodedK, BlockQ8K>;
    case DType::IQ1_M:
      return rows_quant<BlockIQ1_M, DecodedK, BlockQ8K>;
    case DType::TQ1_0:
      return rows_quant<BlockTQ1_0, DecodedK, BlockQ8K>;
    case DType::TQ2_0:
      return rows_quant<BlockTQ2_0, DecodedK, BlockQ8K>;
    default:
      return nullptr;
  }
}

}  // namespace ts::cpu
