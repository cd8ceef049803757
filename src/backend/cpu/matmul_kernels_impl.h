// Internal to the CPU matmul kernels: the per-ISA entry points that matmul_kernels.cpp dispatches
// to. Each returns nullptr for a weight type it has no kernel for.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/matmul_kernels.h"

namespace ts::cpu {

// Computes y[m * ldy + r] for r in [r0, r1), m in [0, x.M); arguments already validated.
using RowsKernel = void (*)(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1,
                            float* y, int64_t ldy);

RowsKernel scalar_kernel(DType t);
RowsKernel avx2_kernel(DType t);
// The AVX-512 path: 512-bit float kernels, and integer kernels with AVX512-VNNI (in their own
// file, so no VNNI instruction can reach a CPU without it; such a CPU uses the AVX2 ones).
RowsKernel avx512_float_kernel(DType t);
RowsKernel avx512vnni_int_kernel(DType t);
// iq3_xxs with AVX512-VBMI besides (nullptr for other types): avx512vnni_int_kernel's sums, bit
// for bit, from fewer instructions.
RowsKernel avx512vbmi_lowbit_kernel(DType t);
// The AVX512-VNNI GEMM for the 32-element block types at M >= kGemmMinRows (nullptr for others).
RowsKernel avx512vnni_gemm_kernel(DType t);
// The AVX512-VNNI GEMM for the k-quants at M >= kGemmMinRows (nullptr for others).
RowsKernel avx512vnni_kgemm_kernel(DType t);
// Weights in the panel layout (panel_layout.h: q8_0, the 32-element 4- and 5-bit types, q4_k, q5_k,
// q6_k, iq4_xs), rows [r0, r1) whole panels: the GEMV for one activation row, the GEMM for more.
RowsKernel avx512vnni_panel_kernel(int64_t M);  // q8_0
// q4_0, iq4_nl, q5_0, q4_1, q5_1, mxfp4 (nullptr for others; mxfp4's M counts both activation
// planes, PackedActs).
RowsKernel avx512vnni_nibble_panel_kernel(DType t, int64_t M);
RowsKernel avx512vnni_q4k_panel_kernel(int64_t M);
RowsKernel avx512vnni_q5k_panel_kernel(int64_t M);
RowsKernel avx512vnni_q6k_panel_kernel(int64_t M);
RowsKernel avx512vnni_iq4xs_panel_kernel(int64_t M);
// Packs panels [p0, p1) of a weight of one of those types in the row layout into the
// panel layout, in place.
void avx512vnni_pack_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                            int64_t p1);  // q8_0
void avx512vnni_pack_nibble_panels(DType t, uint8_t* data, int64_t cols, size_t row_stride,
                                   int64_t p0, int64_t p1);
void avx512vnni_pack_q4k_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                                int64_t p1);
void avx512vnni_pack_q5k_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                                int64_t p1);
void avx512vnni_pack_iq4xs_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                                  int64_t p1);
void avx512vnni_pack_q6k_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                                int64_t p1);

// Register tile of the SIMD kernels (weight rows x activation rows: each loaded vector feeds
// several dot products), and weight rows per cache chunk: a chunk of weight rows stays in L2
// while every tile of activation rows passes over it.
inline constexpr int kRowTile = 2;
inline constexpr int kActTile = 4;
inline constexpr int64_t kRowChunk = 16;
// Activation rows a k-quant prompt's decoded super-blocks meet at a time (KKernel::chunk).
inline constexpr int kActChunk = 32;

// From this many activation rows up, the GEMM's weight repacking (once per matmul) costs less
// than it saves.
inline constexpr int64_t kGemmMinRows = 8;

}  // namespace ts::cpu
