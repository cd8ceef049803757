// llama.cpp's search of one sub-block of an i-quant (ggml-quants.c's quantize_row_iq2_* / iq3_*):
// magnitudes fitted as scale * (2 l + 1) with each group of 4 or 8 levels an entry of the type's
// grid, signs kept apart. The scale is the best of a few trial inverse scales by weighted least
// squares, each trial rounding every group to the grid (the nearest neighbour entry where the
// rounded group is none), then the groups rounded once more against the chosen scale.
#pragma once

#include <cstdint>

#include "quant/grid_codebook.h"

namespace ts {

struct GridSearch {
  int sub_len;       // elements a sub-block (16 or 32)
  bool even_signs;   // signs stored as 7-bit kIqSigns indices: an even count of negatives
  int trials;        // trial inverse scales (2 kMaxQ - 1 + k step) / max, |k| <= trials
  float trial_step;  // step of k
  bool qp_start;     // iq2_xxs: trials around fit_positive's scale rather than the largest value
  bool refine_all;   // the last rounding redoes every group, not only those that were off the grid
  bool refine_always;  // ... even when the best trial had every group on the grid
  float zero_below;    // a sub-block whose largest magnitude is below this is zero
};

struct SubBlockFit {
  float scale = 0;         // >= 0; 0 for a zero sub-block
  uint16_t entry[8] = {};  // grid entry of each group
  uint8_t signs[4] = {};   // sign bits of each 8 elements (7 significant with even_signs)
};

// Fits x (sub_len values) with weights w (> = 0) to the codebook's grid.
SubBlockFit fit_grid_subblock(const GridSearch& s, const GridCodebook& cb, const float* x,
                              const float* w);

}  // namespace ts
