// Host-side launchers of the row copies and the scaling of elementwise.cu that Backend::copy_rows,
// matmul_heads (multi-head latent attention) and scale run on the device; conventions as
// kernels.h's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ts::cuda {

void launch_scale(float* x, int64_t n, float s, cudaStream_t stream);  // x *= s
// For m < M, h < H: dst + m * dst_stride + h * dst_head = src + m * src_stride + h * src_head, n
// floats (Backend::copy_rows is H = 1; matmul_heads gathers and places its heads with it).
void launch_copy_heads(float* dst, int64_t dst_stride, int64_t dst_head, const float* src,
                       int64_t src_stride, int64_t src_head, int64_t M, int64_t H, int64_t n,
                       cudaStream_t stream);

}  // namespace ts::cuda
