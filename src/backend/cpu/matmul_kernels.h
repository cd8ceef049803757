// CPU matmul kernels: one weight matrix (any supported dtype, dense rows) times M activation rows.
// The backend splits the output rows across threads and calls matmul_rows on each range; the
// activations are packed once per matmul (quantised per block for the integer-dot types) so the
// threads share one packing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/weight_layout.h"
#include "core/thread_pool.h"
#include "quant/dtype.h"

namespace ts::cpu {

// `rows` rows of `cols` elements, `row_stride` bytes each; in the row layout row r starts at
// data + r * row_stride, in the panel layout see panel_layout.h.
struct WeightView {
  DType dtype = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;
  WeightLayout layout = WeightLayout::Rows;
};

// Activations in the form the kernel for `wtype` consumes: f32 as given, or blocks of int8 with a
// scale (q8_0-like for the 32-element types, q8_K-like for the k-quants). MXFP4 packs each row in
// two planes: its int8 rounding, then the int8 rounding of what that left, so that the sum of the
// two products is within ~1 / 32000 of each block's largest activation (one plane's 1 / 254 moved
// gpt-oss's expert routing: the fixture's logits further from the exact ones than llama.cpp's).
struct PackedActs {
  DType wtype = DType::F32;
  int64_t M = 0;  // packed rows: planes x the activation rows, plane p's rows from p x M / planes
  int64_t K = 0;
  int planes = 1;
  size_t row_bytes = 0;  // bytes of one packed row in `data`
  std::vector<uint8_t> data;
  const float* f32 = nullptr;  // when no packing is needed: points at the caller's x (M x K)
};

void pack_activations(DType wtype, const float* x, int64_t M, int64_t K, PackedActs& out);
// The same, the rows quantised in parallel on `pool`.
void pack_activations_parallel(ThreadPool& pool, DType wtype, const float* x, int64_t M, int64_t K,
                               PackedActs& out);

// y[m * ldy + r] = dot(row r of w, activation row m) for r in [r0, r1) and m in [0, M / planes).
// Float weights: f32 FMA accumulation. Quantised weights: exact integer dots against the
// activations as packed, i.e. each activation is off by at most d / 2, d = max|x| / 127 over its
// block (MXFP4: about d / 254, by its second plane). A weight in the panel layout takes whole
// panels: r0 and r1 multiples of kPanelRows.
void matmul_rows(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t ldy);

// Which instruction set matmul_rows uses on this machine ("avx512", "avx2" or "scalar"); chosen
// once at run time. TURBOSPARK_ISA=scalar|avx2|avx512 forces a lower path (tests compare them).
const char* matmul_isa();

// How activations meet the weights: rounded to int8 per block (q8, the integer dots of the
// quantised types, the low-bit ones included), or kept in f32 (float weights; MXFP4 and the
// low-bit types when TURBOSPARK_ACTS=f32, the low-bit rows then decoded to f32). MXFP4's values
// are exact in f32, so its f32 path is the exact product, the reference the fixtures hold to
// 1e-4; its default is two int8 planes (PackedActs).
// TURBOSPARK_ACTS=q8|f32 is read once; an unknown value fails (Usage).
bool f32_activations_requested();
bool takes_f32_activations(DType t);

// The kernel families, lowest first. avx2 needs AVX2 + FMA + F16C; avx512 needs AVX-512 F/BW/VL
// on top: 512-bit float kernels, and 256-bit VNNI integer dots when the CPU has AVX512-VNNI (the
// AVX2 integer kernels otherwise).
enum class Isa { Scalar, Avx2, Avx512 };
const char* isa_name(Isa isa);
bool isa_available(Isa isa);  // does this CPU (and OS) support it
Isa active_isa();             // the one matmul_rows uses: resolve_isa(getenv("TURBOSPARK_ISA"))
// The best available path for null or "", else the one named; fails (Usage) on an unknown name
// or one this CPU lacks.
Isa resolve_isa(const char* requested);

// Whether q8_0, q4_k, q5_k, q6_k and iq4_xs weights are packed into the panel layout on this
// machine: the active path is avx512 and the CPU has AVX512-VNNI, whose kernels are the only ones
// that read it.
bool panel_kernels_active();
// Packs panels [p0, p1) of a weight in the row layout (`rows` rows of `cols` elements,
// panel_layout_fits(t, rows)) into the panel layout, in place; fails where
// panel_kernels_active() is false.
void pack_panels(DType t, uint8_t* data, int64_t rows, int64_t cols, size_t row_stride, int64_t p0,
                 int64_t p1);

// matmul_rows on an explicit path (tests and benchmarks compare paths); fails if unavailable.
void matmul_rows_isa(Isa isa, const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1,
                     float* y, int64_t ldy);

}  // namespace ts::cpu
