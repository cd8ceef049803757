// MXFP4 weight kernels against f32 activations: MXFP4 decodes exactly to f32, so these give the
// exact product, the reference path (TURBOSPARK_ACTS=f32, matmul_kernels.h). The default path
// dots int8 activation blocks (DecMXFP4 in matmul_x86_body.h, the scalar kernels' decode).
#pragma once

#include "backend/cpu/matmul_kernels_impl.h"

namespace ts::cpu {

RowsKernel mxfp4_kernel_scalar();
RowsKernel mxfp4_kernel_avx2();  // AVX2 + FMA

}  // namespace ts::cpu
