// MXFP4 weights against f32 activations, portable path. MXFP4's values are exact in f32 (a 3-bit
// e2m1 value times a power of two), so a row is decoded to f32 and multiplied like an f32 weight:
// the activations keep their f32 precision rather than being rounded to 8 bits per block.
#include <vector>

#include "backend/cpu/matmul_mxfp4.h"
#include "quant/dequant.h"

namespace ts::cpu {
namespace {

void rows_mxfp4_scalar(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                       int64_t ldy) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_row(DType::MXFP4, w.data + r * w.row_stride, row.data(), w.cols);
    for (int64_t m = 0; m < x.M; ++m) {
      const float* xm = x.f32 + m * x.K;
      float acc[4] = {0, 0, 0, 0};
      int64_t k = 0;
      for (; k + 4 <= x.K; k += 4)
        for (int u = 0; u < 4; ++u) acc[u] += row[static_cast<size_t>(k + u)] * xm[k + u];
      for (; k < x.K; ++k) acc[0] += row[static_cast<size_t>(k)] * xm[k];
      y[m * ldy + r] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
  }
}

}  // namespace

RowsKernel mxfp4_kernel_scalar() {
  return rows_mxfp4_scalar;
}

}  // namespace ts::cpu
