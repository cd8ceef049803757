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
    default:
      return nullptr;
  }
}

}  // namespace ts::cpu
