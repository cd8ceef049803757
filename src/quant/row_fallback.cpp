#include "quant/row_fallback.h"

namespace ts {

DType row_fallback_dtype(DType t, uint64_t n) {
  if (n % dtype_info(t).block_elems == 0) return t;
  DType to = t;
  switch (t) {
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ4_XS:
      to = DType::IQ4_NL;
      break;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::TQ1_0:
    case DType::TQ2_0:
      to = DType::Q4_0;
      break;
    case DType::Q4_K:
      to = DType::Q5_0;
      break;
    case DType::Q5_K:
      to = DType::Q5_1;
      break;
    case DType::Q6_K:
      to = DType::Q8_0;
      break;
    default:
      break;
  }
  return n % dtype_info(to).block_elems == 0 ? to : DType::F16;
}

}  // namespace ts
