// AVX-512 VNNI integer matmul kernels (see matmul_x86_body.h): vpdpbusd for the plain u8 x s8
// dots and vpdpwssd to apply the int16 sub-block scales, on 256-bit vectors (AVX512-VL).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"
#include "quant/iq_grids.h"

TS_ISA_BEGIN("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni")

#include "backend/cpu/matmul_lowbit_avx512_body.h"
#include "backend/cpu/matmul_lowbit_x86_body.h"
#include "backend/cpu/matmul_vnni_ops.h"
#include "backend/cpu/matmul_x86_body.h"

namespace ts::cpu {

RowsKernel avx512vnni_int_kernel(DType t) {
  switch (t) {
    case DType::IQ2_XXS:
      return krows_driver<KKernel<VnniOps, Grid512<PairsIQ2_XXS>>>;
    case DType::IQ2_XS:
      return krows_driver<KKernel<VnniOps, Grid512<PairsIQ2_XS>>>;
    case DType::IQ2_S:
      return krows_driver<KKernel<VnniOps, Grid512<PairsIQ2_S>>>;
    case DType::IQ3_XXS:
      return krows_driver<KKernel<VnniOps, Grid512<PairsIQ3_XXS>>>;
    case DType::IQ3_S:
      return krows_driver<KKernel<VnniOps, Grid512<PairsIQ3_S>>>;
    case DType::IQ1_S:
      return krows_driver<KKernel<VnniOps, Grid512<PairsIQ1_S>>>;
    case DType::IQ1_M:
      return krows_driver<KKernel<VnniOps, Grid512<PairsIQ1_M>>>;
    default:
      break;
  }
  const RowsKernel k = x86_int_kernel<VnniOps>(t);
  return k != nullptr ? k : x86_lowbit_kernel<VnniOps>(t);
}

}  // namespace ts::cpu

TS_ISA_END()
