// llama.cpp's quantisers of iq1_s and iq1_m (ggml-quants.c's quantize_row_iq1_*_impl): three
// levels (-1, 0, 1) plus a shift of +-1/8 a sub-block (iq1_m: a half sub-block), groups of 8 from
// the i1 grid. With three levels the best split of a sub-block is found exhaustively: sorted, the
// values take level 0 below one boundary, 2 above another, and each pair of boundaries and
// shift has a closed-form least-squares scale. Rows of whole blocks; `importance` null or one
// value a column. Used by quantize_row_searched.
#pragma once

#include <cstdint>

#include "quant/dtype.h"

namespace ts {

// t is IQ1_S or IQ1_M.
void quantize_iq1_row(DType t, const float* x, void* dst, int64_t n, const float* importance);

}  // namespace ts
