// llama.cpp's quantisers of the grid i-quants of 2..3.44 bits (iq2_xxs, iq2_xs, iq2_s, iq3_xxs,
// iq3_s): each sub-block fitted to the grid (grid_search.h), then the sub-block scales coded in
// 4 bits against one f16 scale a block. Rows of whole blocks; `importance` null or one value a
// column. Used by quantize_row_searched.
#pragma once

#include <cstdint>

#include "quant/dtype.h"

namespace ts {

// True for the types quantize_grid_row writes.
bool is_grid_iquant(DType t);
void quantize_grid_row(DType t, const float* x, void* dst, int64_t n, const float* importance);

}  // namespace ts
