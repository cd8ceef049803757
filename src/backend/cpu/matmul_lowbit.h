// Weight kernels for the low-bit types (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
// tq1_0, tq2_0) with f32 activations, under TURBOSPARK_ACTS=f32 (their default is the int8 k-quant
// kernels: matmul_lowbit_x86_body.h). A chunk of weight rows is decoded to f32, bit for bit the
// reference dequantisation, and multiplied by the f32 weight kernel of the same instruction set:
// the exact product, several times slower than the integer dots.
#pragma once

#include "backend/cpu/matmul_kernels_impl.h"

namespace ts::cpu {

bool is_lowbit_type(DType t);

// Decodes one row of `cols` elements of a low-bit type to f32.
using LowbitRowDecoder = void (*)(DType t, const uint8_t* row, float* out, int64_t cols);
LowbitRowDecoder lowbit_decoder_avx2();  // AVX2 + FMA + F16C

RowsKernel lowbit_kernel_scalar();
RowsKernel lowbit_kernel_avx2();
RowsKernel lowbit_kernel_avx512();  // the AVX2 decoders, the AVX-512 f32 kernel

}  // namespace ts::cpu
