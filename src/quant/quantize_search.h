// llama.cpp's quantisers of weight rows, the ones its llama-quantize runs (ggml's quantize_<type>):
// each block's scales found by a weighted least-squares search over trial scales (the k-quants,
// the iq4 types), and, given an importance matrix row, weighted by each column's importance as
// llama.cpp's quantize_row_*_impl weigh it (those and q4_0 / q4_1 / q5_0 / q5_1). The algorithms
// are llama.cpp's; the code is this project's. Slower than quantize_row_weights' round to
// nearest, and closer to the source rows.
#pragma once

#include <cstdint>

#include "quant/dtype.h"

namespace ts {

// Writes n / block_elems blocks of `t`; n must be a whole number of blocks. `importance` is null
// or n values (the mean squared activation seen by each column: an imatrix row). Types without a
// search in llama.cpp (q8_0, the floats, mxfp4) and q4_0 / q4_1 / q5_0 / q5_1 without importance
// are quantize_row_weights'; the low-bit types are llama.cpp's searches too (quantize_grid.h,
// quantize_iq1.h; tq1_0 / tq2_0 round to nearest, as there).
void quantize_row_searched(DType t, const float* x, void* dst, int64_t n, const float* importance);

}  // namespace ts
