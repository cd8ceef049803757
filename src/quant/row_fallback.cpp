#include "quant/row_fallback.h"

namespace ts {

DType row_fallback_dtype(DType t, uint64_t n) {
  if (n % dtype_info(t).block_elems == 0) return t;
  DType to = t;
  if (t == DType::Q2_K || t == DType::Q3_K || t == DType::TQ1_0 || t == DType::TQ2_0)
    to = DType::Q4_0;
  else if (is_lowbit_dtype(t) || t == DType::IQ4_XS)  // the i-quants
    to = DType::IQ4_NL;
  else if (t == DType::Q4_K)
    to = DType::Q5_0;
  else if (t == DType::Q5_K)
    to = DType::Q5_1;
  else if (t == DType::Q6_K)
    to = DType::Q8_0;
  return n % dtype_info(to).block_elems == 0 ? to : DType::F16;
}

}  // namespace ts
