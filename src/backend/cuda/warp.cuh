// Reductions over a warp and over a block, the one definition every kernel uses (the same
// butterfly order everywhere, so that kernels that must agree bit for bit do).
#pragma once

namespace ts::cuda {

// Sum of `v` over the warp, returned to every lane.
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Sum of `v` over the block (whole warps), returned to every thread.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  v = warp_sum(v);
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x / 32);
  v = warp_sum(lane < warps ? partial[lane] : 0.0f);
  __syncthreads();  // partial[] may be reused by the caller's next block_sum
  return v;
}

}  // namespace ts::cuda
