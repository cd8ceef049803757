// Addresses in a q8_0 weight of WeightLayout::Q8Groups (backend/weight_layout.h): rows in groups of
// kQ8GroupRows, each group's codes (cols bytes per row) before its f16 scales (cols / 32 per row).
// A group takes the bytes its rows take in the file's layout, kQ8GroupRows * row_stride.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "backend/weight_layout.h"

namespace ts::cuda {

__device__ __forceinline__ const uint8_t* q8_group(const uint8_t* w, size_t row_stride,
                                                   int64_t row) {
  return w + static_cast<size_t>(row / kQ8GroupRows) * kQ8GroupRows * row_stride;
}

// The codes of `row`: cols bytes.
__device__ __forceinline__ const int8_t* q8_codes(const uint8_t* w, size_t row_stride, int64_t cols,
                                                  int64_t row) {
  return reinterpret_cast<const int8_t*>(q8_group(w, row_stride, row) +
                                         (row % kQ8GroupRows) * cols);
}

// The scales of `row`: one per 32 codes.
__device__ __forceinline__ const __half* q8_scales(const uint8_t* w, size_t row_stride,
                                                   int64_t cols, int64_t row) {
  const uint8_t* scales = q8_group(w, row_stride, row) + kQ8GroupRows * cols;
  return reinterpret_cast<const __half*>(scales) + (row % kQ8GroupRows) * (cols / 32);
}

// Elements e0 .. e0 + 7 of `row` (e0 a multiple of 8), as dequant8<Q8_0> gives them: code * scale.
__device__ __forceinline__ void q8_group_dequant8(const uint8_t* w, size_t row_stride, int64_t cols,
                                                  int64_t row, int64_t e0, float* y) {
  const float d = __half2float(q8_scales(w, row_stride, cols, row)[e0 / 32]);
  const uint2 q = *reinterpret_cast<const uint2*>(q8_codes(w, row_stride, cols, row) + e0);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t word = k < 4 ? q.x : q.y;
    y[k] = static_cast<float>(static_cast<int8_t>((word >> (8 * (k % 4))) & 0xFF)) * d;
  }
}

}  // namespace ts::cuda
