#include "quant/quantize_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/block_pack.h"
#include "quant/block_rows.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "quant/quantize_grid.h"
#include "quant/quantize_iq1.h"
#include "quant/scale_fit.h"

namespace ts {
namespace {

float sum_squares(const float* x, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

// llama.cpp's weight of each element under an importance row: its importance times
// sqrt(sigma2 + x^2), sigma2 a mean square of the block or row around it.
void importance_weights(const float* x, const float* importance, float sigma2, int n, float* w) {
  for (int i = 0; i < n; ++i) w[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
}

float sum(const float* w, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += w[i];
  return s;
}

// ---- q2_k, q4_k, q5_k: a scale and a min per sub-block, x = d * sc * q - dmin * mn.

struct ScaleMinType {
  int sub_len;         // elements per sub-block
  int qmax;            // largest quant code
  int code_max;        // largest scale / min code
  AffineSearch plain;  // the search without importance
  float plain_sigma;   // q4_k / q5_k without importance: weights rms(sub-block) + |x|
  float sigma_scale;   // with importance: sigma2 = sigma_scale * mean square of the block
};

constexpr ScaleMinType kQ2K{16, 3, 15, {-0.5f, 0.1f, 15, true}, 0, 1};
constexpr ScaleMinType kQ4K{32, 15, 63, {-1.0f, 0.1f, 20, false}, 1, 2};
constexpr ScaleMinType kQ5K{32, 31, 63, {-0.5f, 0.1f, 15, false}, 1, 2};
constexpr AffineSearch kImportanceSearch{-0.9f, 0.05f, 36, false};

// Codes of 256 elements and of their sub-block scales and mins; d and dmin stored as f16.
void scale_min_block(const ScaleMinType& t, const float* x, const float* importance,
                     uint16_t& d_bits, uint16_t& dmin_bits, uint8_t* sc, uint8_t* mn, uint8_t* q) {
  const int n_sub = kQKK / t.sub_len;
  float scales[16], mins[16], sw[16], w[kQK32];
  const float sigma2 = t.sigma_scale * sum_squares(x, kQKK) / kQKK;
  for (int j = 0; j < n_sub; ++j) {
    const float* xs = x + j * t.sub_len;
    if (importance != nullptr) {
      importance_weights(xs, importance + j * t.sub_len, sigma2, t.sub_len, w);
      sw[j] = sum(w, t.sub_len);
      scales[j] =
          fit_affine(t.sub_len, t.qmax, xs, w, q + j * t.sub_len, mins[j], kImportanceSearch);
    } else {
      const float av = t.plain_sigma * std::sqrt(sum_squares(xs, t.sub_len) / t.sub_len);
      for (int i = 0; i < t.sub_len; ++i) w[i] = av + std::fabs(xs[i]);
      scales[j] = fit_affine(t.sub_len, t.qmax, xs, w, q + j * t.sub_len, mins[j], t.plain);
    }
  }
  if (importance != nullptr) {
    d_bits = f32_to_f16(fit_positive(n_sub, t.code_max, scales, sw, sc));
    dmin_bits = f32_to_f16(fit_positive(n_sub, t.code_max, mins, sw, mn));
  } else {
    const float max_scale = *std::max_element(scales, scales + n_sub);
    const float max_min = *std::max_element(mins, mins + n_sub);
    const float inv_scale = max_scale > 0 ? static_cast<float>(t.code_max) / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? static_cast<float>(t.code_max) / max_min : 0.0f;
    for (int j = 0; j < n_sub; ++j) {
      sc[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_scale * scales[j]), 0, t.code_max));
      mn[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_min * mins[j]), 0, t.code_max));
    }
    d_bits = f32_to_f16(std::max(max_scale, 0.0f) / static_cast<float>(t.code_max));
    dmin_bits = f32_to_f16(std::max(max_min, 0.0f) / static_cast<float>(t.code_max));
  }
  // The quants again against the scales as stored.
  const float d = f16_to_f32(d_bits), dmin = f16_to_f32(dmin_bits);
  for (int j = 0; j < n_sub; ++j) {
    const float step = d * static_cast<float>(sc[j]);
    if (step == 0) continue;
    const float offset = dmin * static_cast<float>(mn[j]);
    for (int i = 0; i < t.sub_len; ++i) {
      const int e = j * t.sub_len + i;
      q[e] = static_cast<uint8_t>(std::clamp(nearest_int((x[e] + offset) / step), 0, t.qmax));
    }
  }
}

void quantize_q2_k(const float* x, const float* importance, BlockQ2_K& b) {
  uint8_t q[kQKK], sc[16], mn[16];
  scale_min_block(kQ2K, x, importance, b.d, b.dmin, sc, mn, q);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(sc[j] | (mn[j] << 4));
  pack_q2_k_quants(q, b.qs);
}

void quantize_q4_k(const float* x, const float* importance, BlockQ4_K& b) {
  uint8_t q[kQKK], sc[8], mn[8];
  scale_min_block(kQ4K, x, importance, b.d, b.dmin, sc, mn, q);
  pack_k4_scales(sc, mn, b.scales);
  pack_k_nibbles(q, b.qs);
}

void quantize_q5_k(const float* x, const float* importance, BlockQ5_K& b) {
  uint8_t q[kQKK], sc[8], mn[8];
  scale_min_block(kQ5K, x, importance, b.d, b.dmin, sc, mn, q);
  pack_k4_scales(sc, mn, b.scales);
  pack_k_nibbles(q, b.qs);
  pack_q5_k_high(q, b.qh);
}

// ---- q3_k, q6_k: a signed scale per sub-block of 16, x = d * sc * (q - zero).

// Requantises q against the sub-block scales as stored: codes in [0, 2 zero - 1].
void signed_requantize(const float* x, float d, const int* sc, int zero, uint8_t* q) {
  for (int j = 0; j < 16; ++j) {
    const float step = d * static_cast<float>(sc[j]);
    if (step == 0) continue;
    for (int i = 0; i < 16; ++i)
      q[16 * j + i] = static_cast<uint8_t>(
          std::clamp(nearest_int(x[16 * j + i] / step), -zero, zero - 1) + zero);
  }
}

// The sub-block scale of largest magnitude, with its sign.
float signed_largest(const float* v, int n) {
  float best = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(v[i]) > std::fabs(best)) best = v[i];
  return best;
}

void quantize_q3_k(const float* x, const float* importance, BlockQ3_K& b) {
  uint8_t q[kQKK], codes[16];
  float scales[16];
  if (importance != nullptr) {
    const float sigma2 = 2 * sum_squares(x, kQKK) / kQKK;
    float w[16], sw[16];
    for (int j = 0; j < 16; ++j) {
      importance_weights(x + 16 * j, importance + 16 * j, sigma2, 16, w);
      sw[j] = sum(w, 16);
      scales[j] = fit_signed(16, 4, x + 16 * j, w, q + 16 * j);
    }
    b.d = f32_to_f16(fit_signed(16, 32, scales, sw, codes));
  } else {
    for (int j = 0; j < 16; ++j) scales[j] = fit_signed_refined(16, 4, x + 16 * j, q + 16 * j);
    const float max_scale = signed_largest(scales, 16);
    std::memset(codes, 0, sizeof(codes));
    b.d = f32_to_f16(0);
    if (max_scale != 0) {
      const float iscale = -32 / max_scale;
      for (int j = 0; j < 16; ++j)
        codes[j] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * scales[j]), -32, 31) + 32);
      b.d = f32_to_f16(1 / iscale);
    }
  }
  int sc[16];
  for (int j = 0; j < 16; ++j) sc[j] = codes[j] - 32;
  signed_requantize(x, f16_to_f32(b.d), sc, 4, q);
  pack_q3_k(codes, q, b);
}

// Without importance the fit weighs each element by x^2; with it, by the importance alone.
void quantize_q6_k(const float* x, const float* importance, BlockQ6_K& b) {
  uint8_t q[kQKK];
  float scales[16];
  for (int j = 0; j < 16; ++j)
    scales[j] = fit_signed(16, 32, x + 16 * j,
                           importance != nullptr ? importance + 16 * j : nullptr, q + 16 * j);
  const float max_scale = signed_largest(scales, 16);
  if (std::fabs(max_scale) < kGroupEps) {
    std::memset(&b, 0, sizeof(b));
    return;
  }
  const float iscale = -128 / max_scale;
  b.d = f32_to_f16(1 / iscale);
  int sc[16];
  for (int j = 0; j < 16; ++j) {
    sc[j] = std::min(127, nearest_int(iscale * scales[j]));
    b.scales[j] = static_cast<int8_t>(sc[j]);
  }
  signed_requantize(x, f16_to_f32(b.d), sc, 32, q);
  pack_q6_k_quants(q, b);
}

// ---- iq4_nl, iq4_xs: the iq4 grid with a scale per 32 (iq4_xs: 6-bit codes of a block scale).

// Weights of a 32-element group: importance-weighted, else x^2.
void iq4_weights(const float* x, const float* importance, float sigma2, float* w) {
  if (importance != nullptr)
    importance_weights(x, importance, sigma2, kQK32, w);
  else
    for (int i = 0; i < kQK32; ++i) w[i] = x[i] * x[i];
}

void iq4_codes(const float* x, float step, uint8_t* q) {
  const float inv = step != 0 ? 1 / step : 0.0f;
  for (int i = 0; i < kQK32; ++i) q[i] = static_cast<uint8_t>(nearest_iq4_level(inv * x[i]));
}

void quantize_iq4_nl(const float* x, const float* importance, BlockIQ4_NL& b) {
  float w[kQK32];
  iq4_weights(x, importance, 2 * sum_squares(x, kQK32) / kQK32, w);
  const float d = fit_iq4(x, w);
  b.d = f32_to_f16(d);
  uint8_t q[kQK32];
  iq4_codes(x, d, q);
  pack_nibbles32(q, b.qs);
}

void quantize_iq4_xs(const float* x, const float* importance, BlockIQ4_XS& b) {
  const float sigma2 = 2 * sum_squares(x, kQKK) / kQKK;
  float scales[8], w[kQK32];
  for (int j = 0; j < 8; ++j) {
    iq4_weights(x + 32 * j, importance != nullptr ? importance + 32 * j : nullptr, sigma2, w);
    scales[j] = fit_iq4(x + 32 * j, w);
  }
  const float d = -signed_largest(scales, 8) / 32;
  b.d = f32_to_f16(d);
  const float id = d != 0 ? 1 / d : 0.0f;
  uint8_t codes[8];
  for (int j = 0; j < 8; ++j) {
    const int l = std::clamp(nearest_int(id * scales[j]), -32, 31);
    codes[j] = static_cast<uint8_t>(l + 32);
    uint8_t q[kQK32];
    iq4_codes(x + 32 * j, d * static_cast<float>(l), q);
    pack_nibbles32(q, b.qs + 16 * j);
  }
  pack_iq4_xs_scales(codes, b);
}

// ---- q4_0, q5_0, q4_1, q5_1 with importance (sigma2 the mean square of the whole row).

void quantize_q4_0(const float* x, const float* w, BlockQ4_0& b) {
  uint8_t q[kQK32];
  b.d = f32_to_f16(fit_signed(kQK32, 8, x, w, q));
  pack_nibbles32(q, b.qs);
}

void quantize_q5_0(const float* x, const float* w, BlockQ5_0& b) {
  uint8_t q[kQK32];
  b.d = f32_to_f16(fit_signed(kQK32, 16, x, w, q));
  pack_nibbles32(q, b.qs);
  pack_fifth_bits32(q, b.qh);
}

// x = d * q + m with q in [0, qmax], d and m from the weighted affine fit.
void weighted_affine32(const float* x, const float* w, int qmax, uint16_t& d, uint16_t& m,
                       uint8_t* q) {
  float neg_min = 0;
  d = f32_to_f16(fit_affine(kQK32, qmax, x, w, q, neg_min, kImportanceSearch));
  m = f32_to_f16(-neg_min);
}

void quantize_q4_1(const float* x, const float* w, BlockQ4_1& b) {
  uint8_t q[kQK32];
  weighted_affine32(x, w, 15, b.d, b.m, q);
  pack_nibbles32(q, b.qs);
}

void quantize_q5_1(const float* x, const float* w, BlockQ5_1& b) {
  uint8_t q[kQK32];
  weighted_affine32(x, w, 31, b.d, b.m, q);
  pack_nibbles32(q, b.qs);
  pack_fifth_bits32(q, b.qh);
}

// ---- tq1_0, tq2_0: x = d * t with t in {-1, 0, 1} and d the block's largest magnitude (as
// llama.cpp, which has no search and no importance for them: the types are for models trained
// ternary, whose weights already sit at three levels per block).

void ternary_trits(const float* x, uint16_t& d_bits, uint8_t* trits) {
  float amax = 0;
  for (int i = 0; i < kQKK; ++i) amax = std::max(amax, std::fabs(x[i]));
  d_bits = f32_to_f16(amax);
  const float inv = amax != 0 ? 1 / amax : 0.0f;
  for (int i = 0; i < kQKK; ++i) trits[i] = static_cast<uint8_t>(std::lround(x[i] * inv) + 1);
}

void quantize_tq1_0(const float* x, const float*, BlockTQ1_0& b) {
  uint8_t trits[kQKK];
  ternary_trits(x, b.d, trits);
  pack_tq1_0(trits, b);
}

void quantize_tq2_0(const float* x, const float*, BlockTQ2_0& b) {
  uint8_t trits[kQKK];
  ternary_trits(x, b.d, trits);
  pack_tq2_0(trits, b);
}

// The 32-element types with importance: each block's weights from the row's mean square.
template <class Block>
void each_weighted_block(void (*one)(const float*, const float*, Block&), const float* x, void* dst,
                         int64_t n, const float* importance) {
  const float sigma2 = sum_squares(x, n) / static_cast<float>(n);
  Block* blocks = static_cast<Block*>(dst);
  float w[kQK32];
  for (int64_t i = 0; i < n / kQK32; ++i) {
    importance_weights(x + i * kQK32, importance + i * kQK32, sigma2, kQK32, w);
    one(x + i * kQK32, w, blocks[i]);
  }
}

}  // namespace

void quantize_row_searched(DType t, const float* x, void* dst, int64_t n, const float* importance) {
  const DTypeInfo& info = dtype_info(t);
  if (n <= 0 || n % info.block_elems != 0)
    return quantize_row_weights(t, x, dst, n);  // its error for a row of partial blocks
  if (is_grid_iquant(t)) return quantize_grid_row(t, x, dst, n, importance);
  if (t == DType::IQ1_S || t == DType::IQ1_M) return quantize_iq1_row(t, x, dst, n, importance);
  switch (t) {
    case DType::Q2_K:
      return quantize_blocks<BlockQ2_K>(quantize_q2_k, x, dst, n, kQKK, importance);
    case DType::Q3_K:
      return quantize_blocks<BlockQ3_K>(quantize_q3_k, x, dst, n, kQKK, importance);
    case DType::Q4_K:
      return quantize_blocks<BlockQ4_K>(quantize_q4_k, x, dst, n, kQKK, importance);
    case DType::Q5_K:
      return quantize_blocks<BlockQ5_K>(quantize_q5_k, x, dst, n, kQKK, importance);
    case DType::Q6_K:
      return quantize_blocks<BlockQ6_K>(quantize_q6_k, x, dst, n, kQKK, importance);
    case DType::IQ4_NL:
      return quantize_blocks<BlockIQ4_NL>(quantize_iq4_nl, x, dst, n, kQK32, importance);
    case DType::IQ4_XS:
      return quantize_blocks<BlockIQ4_XS>(quantize_iq4_xs, x, dst, n, kQKK, importance);
    case DType::TQ1_0:
      return quantize_blocks<BlockTQ1_0>(quantize_tq1_0, x, dst, n, kQKK, nullptr);
    case DType::TQ2_0:
      return quantize_blocks<BlockTQ2_0>(quantize_tq2_0, x, dst, n, kQKK, nullptr);
    default:
      break;
  }
  if (importance == nullptr) return quantize_row_weights(t, x, dst, n);
  switch (t) {
    case DType::Q4_0:
      return each_weighted_block<BlockQ4_0>(quantize_q4_0, x, dst, n, importance);
    case DType::Q5_0:
      return each_weighted_block<BlockQ5_0>(quantize_q5_0, x, dst, n, importance);
    case DType::Q4_1:
      return each_weighted_block<BlockQ4_1>(quantize_q4_1, x, dst, n, importance);
    case DType::Q5_1:
      return each_weighted_block<BlockQ5_1>(quantize_q5_1, x, dst, n, importance);
    default:
      return quantize_row_weights(t, x, dst, n);
  }
}

}  // namespace ts
