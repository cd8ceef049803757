// The type llama.cpp's quantiser writes for a row that is not a whole number of its type's
// blocks: synth and quantize write the files it would.
#pragma once

#include <cstdint>

#include "quant/dtype.h"

namespace ts {

// For a row of `n` elements of type t: t where n is whole blocks of it; else a 32-element type
// close to t (q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, the i-quants -> iq4_nl, q2_k / q3_k /
// tq* -> q4_0), or f16 when that does not divide n either.
DType row_fallback_dtype(DType t, uint64_t n);

}  // namespace ts
