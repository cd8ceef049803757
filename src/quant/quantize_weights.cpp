// Quantisation of weight rows into the GGML block formats of blocks.h: round to nearest (the iq4
// types: the nearest level of their grid), with each block's scales taken from its own range (no
// importance weighting, no search). Every scale is rounded to its stored precision (f16, or the
// 4/6/8-bit sub-block code) *before* the quants are chosen, so the quants fit the scale the reader
// will see.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/block_pack.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

namespace ts {
namespace {

int nearest(float v) {
  return static_cast<int>(std::nearbyint(v));
}

int clamp_int(int v, int lo, int hi) {
  return std::min(std::max(v, lo), hi);
}

// Stores v as f16 bits and returns the value the reader will decode.
float store_f16(float v, uint16_t& bits) {
  bits = f32_to_f16(v);
  return f16_to_f32(bits);
}

// The element of largest magnitude, with its sign (0 for an empty or all-zero range).
float signed_extreme(const float* x, int n) {
  float ext = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(ext)) ext = x[i];
  return ext;
}

// Quant codes of x / step + zero, clamped to [0, qmax]; zero step gives the zero point.
void codes(const float* x, int n, float step, float offset, int zero, int qmax, uint8_t* q) {
  const float inv = step != 0 ? 1.0f / step : 0.0f;
  for (int i = 0; i < n; ++i)
    q[i] = static_cast<uint8_t>(clamp_int(nearest((x[i] + offset) * inv) + zero, 0, qmax));
}

// Symmetric block of 32 with the largest-magnitude element mapped to -half (q4_0: 8, q5_0: 16).
float symmetric32(const float* x, int half, uint16_t& d_bits, uint8_t* q) {
  const float d = store_f16(signed_extreme(x, kQK32) / static_cast<float>(-half), d_bits);
  codes(x, kQK32, d, 0, half, 2 * half - 1, q);
  return d;
}

// Asymmetric block of 32: x = d * q + m, m the block minimum.
void affine32(const float* x, int qmax, uint16_t& d_bits, uint16_t& m_bits, uint8_t* q) {
  const auto [lo, hi] = std::minmax_element(x, x + kQK32);
  const float m = store_f16(*lo, m_bits);
  const float d = store_f16((*hi - m) / static_cast<float>(qmax), d_bits);
  codes(x, kQK32, d, -m, 0, qmax, q);
}

// llama.cpp's quantize_row_q8_0_ref (and gguf-py's Q8_0): the values are divided by the scale
// before it is rounded to f16, and halves round away from zero, so that files match theirs byte
// for byte.
void quantize_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0;
  for (int i = 0; i < kQK32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  b.d = f32_to_f16(d);
  const float inv = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < kQK32; ++i)
    b.qs[i] = static_cast<int8_t>(clamp_int(static_cast<int>(std::round(x[i] * inv)), -127, 127));
}

void quantize_q4_0(const float* x, BlockQ4_0& b) {
  uint8_t q[kQK32];
  symmetric32(x, 8, b.d, q);
  pack_nibbles32(q, b.qs);
}

void quantize_q4_1(const float* x, BlockQ4_1& b) {
  uint8_t q[kQK32];
  affine32(x, 15, b.d, b.m, q);
  pack_nibbles32(q, b.qs);
}

void quantize_q5_0(const float* x, BlockQ5_0& b) {
  uint8_t q[kQK32];
  symmetric32(x, 16, b.d, q);
  pack_nibbles32(q, b.qs);
  pack_fifth_bits32(q, b.qh);
}

void quantize_q5_1(const float* x, BlockQ5_1& b) {
  uint8_t q[kQK32];
  affine32(x, 31, b.d, b.m, q);
  pack_nibbles32(q, b.qs);
  pack_fifth_bits32(q, b.qh);
}

// The k-quants with a scale and a min per sub-block: x = d * sc[j] * q - dmin * mn[j], with
// sc, mn codes of `code_max` and q in [0, qmax]. Sub-block j gets the step that spans its range
// from min(0, smallest element); d and dmin map the largest step and min to code_max.
struct ScaleMinCodes {
  uint8_t sc[16];
  uint8_t mn[16];
};

ScaleMinCodes scale_min_subblocks(const float* x, int n_sub, int sub_len, int qmax, int code_max,
                                  uint16_t& d_bits, uint16_t& dmin_bits, uint8_t* q) {
  float step[16], neg_min[16];
  float max_step = 0, max_min = 0;
  for (int j = 0; j < n_sub; ++j) {
    const auto [lo, hi] = std::minmax_element(x + j * sub_len, x + (j + 1) * sub_len);
    neg_min[j] = std::max(0.0f, -*lo);
    step[j] = (std::max(*hi, 0.0f) + neg_min[j]) / static_cast<float>(qmax);
    max_step = std::max(max_step, step[j]);
    max_min = std::max(max_min, neg_min[j]);
  }
  const float d = store_f16(max_step / static_cast<float>(code_max), d_bits);
  const float dmin = store_f16(max_min / static_cast<float>(code_max), dmin_bits);
  ScaleMinCodes c{};
  for (int j = 0; j < n_sub; ++j) {
    c.sc[j] = static_cast<uint8_t>(d != 0 ? clamp_int(nearest(step[j] / d), 0, code_max) : 0);
    c.mn[j] =
        static_cast<uint8_t>(dmin != 0 ? clamp_int(nearest(neg_min[j] / dmin), 0, code_max) : 0);
    const float sub_step = d * static_cast<float>(c.sc[j]);
    const float offset = dmin * static_cast<float>(c.mn[j]);
    codes(x + j * sub_len, sub_len, sub_step, offset, 0, qmax, q + j * sub_len);
  }
  return c;
}

// One signed scale per sub-block, x = d * sc[j] * level: each sub-block maps its largest-magnitude
// element to the level -`reach`; d maps the largest-magnitude sub-block scale to -code_half, and
// sc[j] in [-code_half, code_half - 1] is each scale's nearest code. Returns d as stored.
float signed_subblock_scales(const float* x, int n_sub, int sub_len, int reach, int code_half,
                             uint16_t& d_bits, int* sc) {
  float scale[16];
  float ext = 0;
  for (int j = 0; j < n_sub; ++j) {
    scale[j] = signed_extreme(x + j * sub_len, sub_len) / static_cast<float>(-reach);
    if (std::fabs(scale[j]) > std::fabs(ext)) ext = scale[j];
  }
  const float d = store_f16(ext / static_cast<float>(-code_half), d_bits);
  for (int j = 0; j < n_sub; ++j)
    sc[j] = d != 0 ? clamp_int(nearest(scale[j] / d), -code_half, code_half - 1) : 0;
  return d;
}

// The k-quants with signed scales and linear codes: q - zero in [-zero, zero - 1].
void signed_subblocks(const float* x, int n_sub, int sub_len, int zero, int code_half,
                      uint16_t& d_bits, int* sc, uint8_t* q) {
  const float d = signed_subblock_scales(x, n_sub, sub_len, zero, code_half, d_bits, sc);
  for (int j = 0; j < n_sub; ++j)
    codes(x + j * sub_len, sub_len, d * static_cast<float>(sc[j]), 0, zero, 2 * zero - 1,
          q + j * sub_len);
}

// Index of the iq4 level nearest to each x / step (index of level 1, the one nearest 0, for a
// zero step).
void iq4_codes(const float* x, int n, float step, uint8_t* q) {
  const float inv = step != 0 ? 1.0f / step : 0.0f;
  for (int i = 0; i < n; ++i) {
    const float v = x[i] * inv;
    int best = 0;
    for (int l = 1; l < 16; ++l)
      if (std::fabs(v - kIq4Levels[l]) < std::fabs(v - kIq4Levels[best])) best = l;
    q[i] = static_cast<uint8_t>(best);
  }
}

void quantize_q2_k(const float* x, BlockQ2_K& b) {
  uint8_t q[kQKK];
  const ScaleMinCodes c = scale_min_subblocks(x, 16, 16, 3, 15, b.d, b.dmin, q);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(c.sc[j] | (c.mn[j] << 4));
  pack_q2_k_quants(q, b.qs);
}

void quantize_q3_k(const float* x, BlockQ3_K& b) {
  uint8_t q[kQKK], codes[16];
  int sc[16];
  signed_subblocks(x, 16, 16, 4, 32, b.d, sc, q);
  for (int j = 0; j < 16; ++j) codes[j] = static_cast<uint8_t>(sc[j] + 32);
  pack_q3_k(codes, q, b);
}

void quantize_q4_k(const float* x, BlockQ4_K& b) {
  uint8_t q[kQKK];
  const ScaleMinCodes c = scale_min_subblocks(x, 8, 32, 15, 63, b.d, b.dmin, q);
  pack_k4_scales(c.sc, c.mn, b.scales);
  pack_k_nibbles(q, b.qs);
}

void quantize_q5_k(const float* x, BlockQ5_K& b) {
  uint8_t q[kQKK];
  const ScaleMinCodes c = scale_min_subblocks(x, 8, 32, 31, 63, b.d, b.dmin, q);
  pack_k4_scales(c.sc, c.mn, b.scales);
  pack_k_nibbles(q, b.qs);
  pack_q5_k_high(q, b.qh);
}

void quantize_q6_k(const float* x, BlockQ6_K& b) {
  uint8_t q[kQKK];
  int sc[16];
  signed_subblocks(x, 16, 16, 32, 128, b.d, sc, q);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(sc[j]);
  pack_q6_k_quants(q, b);
}

// The largest-magnitude element maps to the level -127, the grid's widest.
void quantize_iq4_nl(const float* x, BlockIQ4_NL& b) {
  uint8_t q[kQK32];
  iq4_codes(x, kQK32, store_f16(signed_extreme(x, kQK32) / -127.0f, b.d), q);
  pack_nibbles32(q, b.qs);
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS& b) {
  int sc[8];
  uint8_t codes[8];
  const float d = signed_subblock_scales(x, 8, 32, 127, 32, b.d, sc);
  for (int j = 0; j < 8; ++j) {
    codes[j] = static_cast<uint8_t>(sc[j] + 32);
    uint8_t q[kQK32];
    iq4_codes(x + 32 * j, kQK32, d * static_cast<float>(sc[j]), q);
    pack_nibbles32(q, b.qs + 16 * j);
  }
  pack_iq4_xs_scales(codes, b);
}

// As gguf-py's quantiser: the e8m0 exponent floor(log2 amax) - 2 + 127 (read exactly from the
// float's exponent) puts the block's largest magnitude in [8, 16) times the half scale
// 2^(e - 128); each element is then the nearest doubled e2m1 value (the first of equals).
void quantize_mxfp4(const float* x, BlockMXFP4& b) {
  float amax = 0;
  for (int i = 0; i < kQK32; ++i) amax = std::max(amax, std::fabs(x[i]));
  int exp = 0;
  std::frexp(amax, &exp);  // amax = m 2^exp, m in [0.5, 1): floor(log2 amax) = exp - 1
  b.e = amax > 0 ? static_cast<uint8_t>(std::clamp(exp - 1 - 2 + 127, 0, 254)) : 0;
  const float d = mxfp4_half_scale(b.e);
  uint8_t q[kQK32];
  for (int i = 0; i < kQK32; ++i) {
    int best = 0;
    for (int c = 1; c < 16; ++c)
      if (std::fabs(d * kMxfp4Doubled[c] - x[i]) < std::fabs(d * kMxfp4Doubled[best] - x[i]))
        best = c;
    q[i] = static_cast<uint8_t>(best);
  }
  pack_nibbles32(q, b.qs);
}

template <class Block>
void quantize_blocks(void (*one)(const float*, Block&), const float* x, void* dst, int64_t n,
                     int block_elems) {
  Block* blocks = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / block_elems; ++i) one(x + i * block_elems, blocks[i]);
}

}  // namespace

// The low-bit types have kernels but no quantiser here: theirs need a codebook search guided by
// an importance matrix (llama.cpp's), without which they lose most of a model's quality.
bool can_quantize_weights(DType t) {
  return is_weight_dtype_supported(t) && !is_lowbit_dtype(t);
}

void quantize_row_weights(DType t, const float* x, void* dst, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  if (!can_quantize_weights(t))
    fail(ErrorKind::Unsupported,
         std::string("quantize_row_weights: no quantiser for dtype ") + info.name);
  if (n < 0 || n % info.block_elems != 0)
    fail(ErrorKind::Usage, std::string("quantize_row_weights: ") + std::to_string(n) +
                               " elements is not a whole number of " + info.name + " blocks");
  auto* h = static_cast<uint16_t*>(dst);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(x[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(x[i]);
      return;
    case DType::Q4_0:
      return quantize_blocks<BlockQ4_0>(quantize_q4_0, x, dst, n, kQK32);
    case DType::Q4_1:
      return quantize_blocks<BlockQ4_1>(quantize_q4_1, x, dst, n, kQK32);
    case DType::Q5_0:
      return quantize_blocks<BlockQ5_0>(quantize_q5_0, x, dst, n, kQK32);
    case DType::Q5_1:
      return quantize_blocks<BlockQ5_1>(quantize_q5_1, x, dst, n, kQK32);
    case DType::Q8_0:
      return quantize_blocks<BlockQ8_0>(quantize_q8_0, x, dst, n, kQK32);
    case DType::Q2_K:
      return quantize_blocks<BlockQ2_K>(quantize_q2_k, x, dst, n, kQKK);
    case DType::Q3_K:
      return quantize_blocks<BlockQ3_K>(quantize_q3_k, x, dst, n, kQKK);
    case DType::Q4_K:
      return quantize_blocks<BlockQ4_K>(quantize_q4_k, x, dst, n, kQKK);
    case DType::Q5_K:
      return quantize_blocks<BlockQ5_K>(quantize_q5_k, x, dst, n, kQKK);
    case DType::Q6_K:
      return quantize_blocks<BlockQ6_K>(quantize_q6_k, x, dst, n, kQKK);
    case DType::IQ4_NL:
      return quantize_blocks<BlockIQ4_NL>(quantize_iq4_nl, x, dst, n, kQK32);
    case DType::IQ4_XS:
      return quantize_blocks<BlockIQ4_XS>(quantize_iq4_xs, x, dst, n, kQKK);
    case DType::MXFP4:
      return quantize_blocks<BlockMXFP4>(quantize_mxfp4, x, dst, n, kQK32);
    default:
      fail(ErrorKind::Unsupported,
           std::string("quantize_row_weights: no quantiser for dtype ") + info.name);
  }
}

}  // namespace ts
