#include "quant/quantize_iq1.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>

#include "quant/block_rows.h"
#include "quant/blocks.h"
#include "quant/dequant.h"
#include "quant/grid_codebook.h"
#include "quant/scale_fit.h"

namespace ts {
namespace {

// The value of level l (0, 1, 2) under a shift: -1, 0, 1 moved by +1/8 (shift bit clear) or
// -1/8 (set), as the dequantiser adds its delta.
float level_value(int l, bool minus) {
  return static_cast<float>(l - 1) + (minus ? -kIq1Delta : kIq1Delta);
}

struct Iq1Fit {
  float scale = 0;
  int shifts = 0;          // bit h set: half h shifted by -1/8 (iq1_s: one half)
  uint16_t entry[4] = {};  // grid entry of each group of 8
};

// The shift of group q of a sub-block of `halves` halves and n elements.
bool group_minus(int shifts, int halves, int q, int n) {
  const int h = halves == 1 ? 0 : (8 * q) / (n / 2);
  return (shifts >> (halves - 1 - h)) & 1;
}

// One sub-block of n (32 or 16) elements with `halves` independently shifted halves.
Iq1Fit fit_iq1_subblock(const float* x, const float* w, int n, int halves, float zero_below) {
  const GridCodebook& cb = iq1s_codebook();
  Iq1Fit fit;
  int8_t l[32];
  std::fill(l, l + n, 1);
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, std::fabs(x[i]));
  const auto zero = [&] {
    // No entry decodes to zero (the shift is never 0): the entry of eight 0s (level 1) comes
    // closest, and the block scale of an all-zero block makes it exact.
    const int e = cb.entry(cb.key(l));
    for (int q = 0; q < n / 8; ++q) fit.entry[q] = static_cast<uint16_t>(std::max(e, 0));
    return fit;
  };
  if (max < zero_below) return zero();
  // Sorted, with prefix sums of w x and w per half.
  int order[32];
  std::iota(order, order + n, 0);
  std::sort(order, order + n, [&](int a, int b) { return x[a] < x[b]; });
  float sx[2][33] = {}, sw[2][33] = {};
  for (int j = 0; j < n; ++j) {
    const int i = order[j], h = halves == 1 ? 0 : i / (n / 2);
    for (int k = 0; k < halves; ++k) {
      sx[k][j + 1] = sx[k][j] + (k == h ? w[i] * x[i] : 0.0f);
      sw[k][j + 1] = sw[k][j] + (k == h ? w[i] : 0.0f);
    }
  }
  float best = -FLT_MAX, scale = max;
  int best1 = -1, best2 = -1, best_shifts = -1;
  for (int i1 = 0; i1 <= n; ++i1) {
    for (int i2 = i1; i2 <= n; ++i2) {
      for (int shifts = 0; shifts < (1 << halves); ++shifts) {
        float sumqx = 0, sumq2 = 0;
        for (int h = 0; h < halves; ++h) {
          const bool minus = (shifts >> (halves - 1 - h)) & 1;
          const float v0 = level_value(0, minus), v1 = level_value(1, minus),
                      v2 = level_value(2, minus);
          sumqx += sx[h][i1] * v0 + (sx[h][i2] - sx[h][i1]) * v1 + (sx[h][n] - sx[h][i2]) * v2;
          sumq2 += sw[h][i1] * v0 * v0 + (sw[h][i2] - sw[h][i1]) * v1 * v1 +
                   (sw[h][n] - sw[h][i2]) * v2 * v2;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          best1 = i1;
          best2 = i2;
          best_shifts = shifts;
        }
      }
    }
  }
  if (best_shifts < 0) return zero();
  for (int j = 0; j < n; ++j) l[order[j]] = static_cast<int8_t>(j < best1 ? 0 : j < best2 ? 1 : 2);
  if (scale < 0) {
    // Mirrored levels and shifts give the same values with a positive scale.
    for (int j = 0; j < n; ++j) l[j] = static_cast<int8_t>(2 - l[j]);
    scale = -scale;
    best_shifts ^= (1 << halves) - 1;
  }
  bool all_on_grid = true;
  for (int q = 0; q < n / 8; ++q) {
    const uint32_t key = cb.key(l + 8 * q);
    int e = cb.entry(key);
    if (e < 0) {
      all_on_grid = false;
      const bool minus = group_minus(best_shifts, halves, q, n);
      const float value[3] = {scale * level_value(0, minus), scale * level_value(1, minus),
                              scale * level_value(2, minus)};
      e = cb.nearest(key, x + 8 * q, w + 8 * q, value);
    }
    fit.entry[q] = static_cast<uint16_t>(e);
  }
  if (!all_on_grid) {
    float sumqx = 0, sumq2 = 0;
    for (int q = 0; q < n / 8; ++q) {
      const bool minus = group_minus(best_shifts, halves, q, n);
      for (int j = 0; j < 8; ++j) {
        const float v = level_value(cb.level(fit.entry[q], j), minus);
        sumqx += w[8 * q + j] * v * x[8 * q + j];
        sumq2 += w[8 * q + j] * v * v;
      }
    }
    if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
  }
  fit.scale = scale;
  fit.shifts = best_shifts;
  return fit;
}

// llama.cpp's element weights: importance * sqrt(sigma2 + x^2); without importance x^2 (iq1_m),
// or importance 1 (iq1_s, for which llama.cpp requires one).
void iq1_weights(const float* x, const float* importance, float sigma2, int n, bool uniform,
                 float* w) {
  for (int i = 0; i < n; ++i) {
    if (importance != nullptr || uniform)
      w[i] = (importance != nullptr ? importance[i] : 1.0f) * std::sqrt(sigma2 + x[i] * x[i]);
    else
      w[i] = x[i] * x[i];
  }
}

float block_sigma2(const float* x) {
  float s = 0;
  for (int i = 0; i < kQKK; ++i) s += x[i] * x[i];
  return 2 * s / kQKK;
}

// 3-bit codes of the sub-block scales against d = max / 15: scale ~ d (2 code + 1).
int scale_code(float scale, float d) {
  const float id = 1 / d;
  return std::clamp(nearest_int(0.5f * (id * scale - 1)), 0, 7);
}

void quantize_iq1_s(const float* x, const float* importance, BlockIQ1_S& b) {
  std::memset(&b, 0, sizeof(b));
  const float sigma2 = block_sigma2(x);
  Iq1Fit fits[8];
  float w[32], max_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    iq1_weights(x + 32 * ib, importance != nullptr ? importance + 32 * ib : nullptr, sigma2, 32,
                true, w);
    fits[ib] = fit_iq1_subblock(x + 32 * ib, w, 32, 1, 1e-12f);
    max_scale = std::max(max_scale, fits[ib].scale);
  }
  if (max_scale == 0) return;
  const float d = max_scale / 15;
  b.d = f32_to_f16(d * 1.125f);  // llama.cpp's tuning of the stored scale
  for (int ib = 0; ib < 8; ++ib) {
    int qh = scale_code(fits[ib].scale, d) << 12 | fits[ib].shifts << 15;
    for (int q = 0; q < 4; ++q) {
      b.qs[4 * ib + q] = static_cast<uint8_t>(fits[ib].entry[q] & 255);
      qh |= (fits[ib].entry[q] >> 8) << (3 * q);
    }
    b.qh[ib] = static_cast<uint16_t>(qh);
  }
}

void quantize_iq1_m(const float* x, const float* importance, BlockIQ1_M& b) {
  std::memset(&b, 0, sizeof(b));
  const float sigma2 = block_sigma2(x);
  Iq1Fit fits[16];
  float w[kQKK], max_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    iq1_weights(x + 16 * ib, importance != nullptr ? importance + 16 * ib : nullptr, sigma2, 16,
                false, w + 16 * ib);
    fits[ib] = fit_iq1_subblock(x + 16 * ib, w + 16 * ib, 16, 2, 1e-7f);
    max_scale = std::max(max_scale, fits[ib].scale);
  }
  if (max_scale == 0) return;
  const GridCodebook& cb = iq1s_codebook();
  uint16_t sc[4] = {};
  float sumqx = 0, sumq2 = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const int code = scale_code(fits[ib].scale, max_scale / 15);
    sc[ib / 4] = static_cast<uint16_t>(sc[ib / 4] | code << (3 * (ib % 4)));
    int qh = 0;
    for (int q = 0; q < 2; ++q) {
      const bool minus = group_minus(fits[ib].shifts, 2, q, 16);
      b.qs[2 * ib + q] = static_cast<uint8_t>(fits[ib].entry[q] & 255);
      qh |= ((fits[ib].entry[q] >> 8) | (minus ? 8 : 0)) << (4 * q);
      // The block scale refitted to the coded sub-block scales.
      for (int j = 0; j < 8; ++j) {
        const int e = 16 * ib + 8 * q + j;
        const float v =
            level_value(cb.level(fits[ib].entry[q], j), minus) * static_cast<float>(2 * code + 1);
        sumqx += w[e] * v * x[e];
        sumq2 += w[e] * v * v;
      }
    }
    b.qh[ib] = static_cast<uint8_t>(qh);
  }
  const float d = sumq2 > 0 ? sumqx / sumq2 : max_scale / 15;
  const uint16_t bits = f32_to_f16(d * 1.1125f);  // llama.cpp's tuning of the stored scale
  for (int i = 0; i < 4; ++i)
    sc[i] = static_cast<uint16_t>(sc[i] | ((bits >> (4 * i)) & 0xF) << 12);
  std::memcpy(b.scales, sc, sizeof(sc));
}

}  // namespace

void quantize_iq1_row(DType t, const float* x, void* dst, int64_t n, const float* importance) {
  if (t == DType::IQ1_S)
    return quantize_blocks<BlockIQ1_S>(quantize_iq1_s, x, dst, n, kQKK, importance);
  quantize_blocks<BlockIQ1_M>(quantize_iq1_m, x, dst, n, kQKK, importance);
}

}  // namespace ts
