// The low-bit types' rows kernel: decode a chunk of weight rows to f32, then the f32 kernel.
#include "backend/cpu/matmul_lowbit.h"

#include <algorithm>
#include <vector>

#include "quant/dequant.h"

namespace ts::cpu {
namespace {

void decode_reference(DType t, const uint8_t* row, float* out, int64_t cols) {
  dequantize_row(t, row, out, cols);
}

// Rows [r0, r1) in chunks of kRowChunk: each chunk decoded into a per-thread buffer (kRowChunk x
// cols floats, L2-sized for real widths) and handed to `f32` as an f32 weight of those rows.
void rows_lowbit(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t ldy, LowbitRowDecoder decode, RowsKernel f32) {
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(kRowChunk * w.cols));
  PackedActs xf;
  xf.wtype = DType::F32;
  xf.M = x.M;
  xf.K = x.K;
  xf.row_bytes = static_cast<size_t>(x.K) * sizeof(float);
  xf.f32 = x.f32;
  for (int64_t c0 = r0; c0 < r1; c0 += kRowChunk) {
    const int64_t n = std::min(kRowChunk, r1 - c0);
    for (int64_t i = 0; i < n; ++i)
      decode(w.dtype, w.data + (c0 + i) * static_cast<int64_t>(w.row_stride),
             buf.data() + i * w.cols, w.cols);
    WeightView fw;
    fw.dtype = DType::F32;
    fw.data = reinterpret_cast<const uint8_t*>(buf.data());
    fw.rows = n;
    fw.cols = w.cols;
    fw.row_stride = static_cast<size_t>(w.cols) * sizeof(float);
    f32(fw, xf, 0, n, y + c0, ldy);
  }
}

void rows_lowbit_scalar(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                        int64_t ldy) {
  rows_lowbit(w, x, r0, r1, y, ldy, decode_reference, scalar_kernel(DType::F32));
}

void rows_lowbit_avx2(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                      int64_t ldy) {
  rows_lowbit(w, x, r0, r1, y, ldy, lowbit_decoder_avx2(), avx2_kernel(DType::F32));
}

void rows_lowbit_avx512(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                        int64_t ldy) {
  rows_lowbit(w, x, r0, r1, y, ldy, lowbit_decoder_avx2(), avx512_float_kernel(DType::F32));
}

}  // namespace

bool is_lowbit_type(DType t) {
  return is_lowbit_dtype(t);
}

RowsKernel lowbit_kernel_scalar() {
  return rows_lowbit_scalar;
}

RowsKernel lowbit_kernel_avx2() {
  return rows_lowbit_avx2;
}

RowsKernel lowbit_kernel_avx512() {
  return rows_lowbit_avx512;
}

}  // namespace ts::cpu
