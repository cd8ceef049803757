// MXFP4 weight kernels: f32 activations (MXFP4 decodes exactly to f32).
#pragma once

#include "backend/cpu/matmul_kernels_impl.h"

namespace ts::cpu {

RowsKernel mxfp4_kernel_scalar();
RowsKernel mxfp4_kernel_avx2();  // AVX2 + FMA

}  // namespace ts::cpu
