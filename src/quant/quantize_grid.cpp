#include "quant/quantize_grid.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/block_rows.h"
#include "quant/blocks.h"
#include "quant/dequant.h"
#include "quant/grid_search.h"
#include "quant/scale_fit.h"

namespace ts {
namespace {

// Weights of a sub-block without an importance row.
enum class Unweighted {
  Square,             // x^2 (the iq3 types)
  SigmaSquare,        // sigma2 / 4 + x^2 (iq2_s)
  UniformImportance,  // importance 1 (iq2_xxs / iq2_xs, for which llama.cpp requires one)
};

struct GridType {
  GridSearch search;
  const GridCodebook& (*codebook)();
  float sigma_factor;  // sigma2 = sigma_factor * mean square of the block
  Unweighted unweighted;
  float fudge;  // the stored block scale is max_scale / 31 times this (llama.cpp's tuning)
};

// llama.cpp's settings per type (its quantize_row_iq*_impl).
const GridType kIq2xxs{.search = {.sub_len = 32,
                                  .even_signs = true,
                                  .trials = 6,
                                  .trial_step = 0.1f,
                                  .qp_start = true,
                                  .refine_all = true,
                                  .refine_always = true,
                                  .zero_below = kGroupEps},
                       .codebook = iq2xxs_codebook,
                       .sigma_factor = 1,
                       .unweighted = Unweighted::UniformImportance,
                       .fudge = 1};
const GridType kIq2xs{.search = {.sub_len = 16,
                                 .even_signs = true,
                                 .trials = 9,
                                 .trial_step = 0.1f,
                                 .qp_start = false,
                                 .refine_all = false,
                                 .refine_always = false,
                                 .zero_below = kGroupEps},
                      .codebook = iq2xs_codebook,
                      .sigma_factor = 1,
                      .unweighted = Unweighted::UniformImportance,
                      .fudge = 1};
const GridType kIq2s{.search = {.sub_len = 16,
                                .even_signs = false,
                                .trials = 9,
                                .trial_step = 0.1f,
                                .qp_start = false,
                                .refine_all = false,
                                .refine_always = false,
                                .zero_below = 1e-8f},
                     .codebook = iq2s_codebook,
                     .sigma_factor = 2,
                     .unweighted = Unweighted::SigmaSquare,
                     .fudge = 0.9875f};
const GridType kIq3xxs{.search = {.sub_len = 32,
                                  .even_signs = true,
                                  .trials = 15,
                                  .trial_step = 0.2f,
                                  .qp_start = false,
                                  .refine_all = false,
                                  .refine_always = false,
                                  .zero_below = 1e-8f},
                       .codebook = iq3xxs_codebook,
                       .sigma_factor = 2,
                       .unweighted = Unweighted::Square,
                       .fudge = 1.0125f};
const GridType kIq3s{.search = {.sub_len = 32,
                                .even_signs = false,
                                .trials = 9,
                                .trial_step = 0.2f,
                                .qp_start = false,
                                .refine_all = true,
                                .refine_always = false,
                                .zero_below = 0},
                     .codebook = iq3s_codebook,
                     .sigma_factor = 2,
                     .unweighted = Unweighted::Square,
                     .fudge = 1.033f};

// The fits of a block's sub-blocks and the 4-bit codes of their scales against the block's
// scale d: scale ~ d * (2 code + 1). Returns d as stored (f16 bits; 0 for an all-zero block).
uint16_t fit_block(const GridType& t, const float* x, const float* importance, SubBlockFit* fits,
                   uint8_t* codes) {
  const int n = t.search.sub_len, subs = kQKK / n;
  float sumx2 = 0;
  for (int i = 0; i < kQKK; ++i) sumx2 += x[i] * x[i];
  const float sigma2 = t.sigma_factor * sumx2 / kQKK;
  float max_scale = 0, w[32];
  for (int b = 0; b < subs; ++b) {
    const float* xb = x + n * b;
    for (int i = 0; i < n; ++i) {
      if (importance != nullptr || t.unweighted == Unweighted::UniformImportance)
        w[i] = (importance != nullptr ? importance[n * b + i] : 1.0f) *
               std::sqrt(sigma2 + xb[i] * xb[i]);
      else
        w[i] = (t.unweighted == Unweighted::SigmaSquare ? 0.25f * sigma2 : 0.0f) + xb[i] * xb[i];
    }
    fits[b] = fit_grid_subblock(t.search, t.codebook(), xb, w);
    max_scale = std::max(max_scale, fits[b].scale);
  }
  std::memset(codes, 0, static_cast<size_t>(subs));
  if (max_scale == 0) return 0;
  const float d = max_scale / 31, id = 1 / d;
  for (int b = 0; b < subs; ++b)
    codes[b] =
        static_cast<uint8_t>(std::clamp(nearest_int(0.5f * (id * fits[b].scale - 1)), 0, 15));
  return f32_to_f16(d * t.fudge);
}

// A zeroed block with its scale set; false for an all-zero block (nothing else to write).
template <class Block>
bool fit_zeroed(const GridType& t, const float* x, const float* importance, Block& b,
                SubBlockFit* fits, uint8_t* codes) {
  std::memset(&b, 0, sizeof(b));
  b.d = fit_block(t, x, importance, fits, codes);
  return b.d != 0;
}

// Four 7-bit sign indices and a 4-bit scale code in one u32 (iq2_xxs, iq3_xxs).
uint32_t signs_and_scale(const SubBlockFit& f, uint8_t code) {
  uint32_t v = static_cast<uint32_t>(code) << 28;
  for (int k = 0; k < 4; ++k) v |= static_cast<uint32_t>(f.signs[k]) << (7 * k);
  return v;
}

void quantize_iq2_xxs(const float* x, const float* importance, BlockIQ2_XXS& b) {
  SubBlockFit fits[8];
  uint8_t codes[8];
  if (!fit_zeroed(kIq2xxs, x, importance, b, fits, codes)) return;
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t entries = 0;
    for (int k = 0; k < 4; ++k) entries |= static_cast<uint32_t>(fits[ib].entry[k]) << (8 * k);
    const uint32_t aux[2] = {entries, signs_and_scale(fits[ib], codes[ib])};
    std::memcpy(b.qs + 4 * ib, aux, sizeof(aux));
  }
}

void quantize_iq2_xs(const float* x, const float* importance, BlockIQ2_XS& b) {
  SubBlockFit fits[16];
  uint8_t codes[16];
  if (!fit_zeroed(kIq2xs, x, importance, b, fits, codes)) return;
  for (int ib = 0; ib < 16; ++ib) {
    for (int k = 0; k < 2; ++k)
      b.qs[2 * ib + k] = static_cast<uint16_t>(fits[ib].entry[k] | (fits[ib].signs[k] << 9));
    b.scales[ib / 2] |= static_cast<uint8_t>(codes[ib] << (4 * (ib % 2)));
  }
}

void quantize_iq2_s(const float* x, const float* importance, BlockIQ2_S& b) {
  SubBlockFit fits[16];
  uint8_t codes[16];
  if (!fit_zeroed(kIq2s, x, importance, b, fits, codes)) return;
  for (int ib = 0; ib < 16; ++ib) {
    for (int k = 0; k < 2; ++k) {
      const int g = 2 * ib + k;
      b.qs[g] = static_cast<uint8_t>(fits[ib].entry[k] & 255);
      b.qh[g / 4] |= static_cast<uint8_t>((fits[ib].entry[k] >> 8) << (2 * (g % 4)));
      b.qs[kQKK / 8 + g] = fits[ib].signs[k];
    }
    b.scales[ib / 2] |= static_cast<uint8_t>(codes[ib] << (4 * (ib % 2)));
  }
}

void quantize_iq3_xxs(const float* x, const float* importance, BlockIQ3_XXS& b) {
  SubBlockFit fits[8];
  uint8_t codes[8];
  if (!fit_zeroed(kIq3xxs, x, importance, b, fits, codes)) return;
  for (int ib = 0; ib < 8; ++ib) {
    for (int k = 0; k < 8; ++k) b.qs[8 * ib + k] = static_cast<uint8_t>(fits[ib].entry[k]);
    const uint32_t aux = signs_and_scale(fits[ib], codes[ib]);
    std::memcpy(b.qs + kQKK / 4 + 4 * ib, &aux, sizeof(aux));
  }
}

void quantize_iq3_s(const float* x, const float* importance, BlockIQ3_S& b) {
  SubBlockFit fits[8];
  uint8_t codes[8];
  if (!fit_zeroed(kIq3s, x, importance, b, fits, codes)) return;
  for (int ib = 0; ib < 8; ++ib) {
    for (int k = 0; k < 8; ++k) {
      b.qs[8 * ib + k] = static_cast<uint8_t>(fits[ib].entry[k] & 255);
      b.qh[ib] |= static_cast<uint8_t>((fits[ib].entry[k] >> 8) << k);
    }
    std::memcpy(b.signs + 4 * ib, fits[ib].signs, 4);
    b.scales[ib / 2] |= static_cast<uint8_t>(codes[ib] << (4 * (ib % 2)));
  }
}

}  // namespace

bool is_grid_iquant(DType t) {
  return t == DType::IQ2_XXS || t == DType::IQ2_XS || t == DType::IQ2_S || t == DType::IQ3_XXS ||
         t == DType::IQ3_S;
}

void quantize_grid_row(DType t, const float* x, void* dst, int64_t n, const float* importance) {
  switch (t) {
    case DType::IQ2_XXS:
      return quantize_blocks<BlockIQ2_XXS>(quantize_iq2_xxs, x, dst, n, kQKK, importance);
    case DType::IQ2_XS:
      return quantize_blocks<BlockIQ2_XS>(quantize_iq2_xs, x, dst, n, kQKK, importance);
    case DType::IQ2_S:
      return quantize_blocks<BlockIQ2_S>(quantize_iq2_s, x, dst, n, kQKK, importance);
    case DType::IQ3_XXS:
      return quantize_blocks<BlockIQ3_XXS>(quantize_iq3_xxs, x, dst, n, kQKK, importance);
    default:
      return quantize_blocks<BlockIQ3_S>(quantize_iq3_s, x, dst, n, kQKK, importance);
  }
}

}  // namespace ts
