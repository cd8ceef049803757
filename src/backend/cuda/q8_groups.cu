// Rearranging uploaded q8_0 weights into WeightLayout::Q8Groups (q8_groups.cuh), in place.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8_groups.cuh"
#include "quant/blocks.h"

namespace ts::cuda {
namespace {

constexpr int kThreads = 256;

// One block per group: the group's rows are read into shared memory whole before any byte of the
// group is written back in the new order.
__global__ void __launch_bounds__(kThreads)
    pack_q8_groups_kernel(uint8_t* w, size_t row_stride, int64_t cols) {
  pdl_enter();
  extern __shared__ __align__(16) uint8_t stage[];
  uint8_t* group = w + static_cast<size_t>(blockIdx.x) * kQ8GroupRows * row_stride;
  const size_t vectors = kQ8GroupRows * row_stride / 16;
  for (size_t i = threadIdx.x; i < vectors; i += blockDim.x)
    reinterpret_cast<uint4*>(stage)[i] = reinterpret_cast<const uint4*>(group)[i];
  __syncthreads();
  const int64_t blocks = cols / 32;
  for (int64_t i = threadIdx.x; i < kQ8GroupRows * cols; i += blockDim.x) {
    const int64_t r = i / cols, e = i % cols;
    group[i] = stage[r * row_stride + (e / 32) * sizeof(BlockQ8_0) + 2 + e % 32];
  }
  uint8_t* scales = group + kQ8GroupRows * cols;
  for (int64_t i = threadIdx.x; i < kQ8GroupRows * blocks; i += blockDim.x) {
    const uint8_t* d = stage + (i / blocks) * row_stride + (i % blocks) * sizeof(BlockQ8_0);
    scales[2 * i] = d[0];
    scales[2 * i + 1] = d[1];
  }
}

size_t group_bytes(const Weight& w) {
  return static_cast<size_t>(kQ8GroupRows) * w.row_stride;
}

}  // namespace

// Columns in 64s: a group (4 rows of cols / 32 blocks of 34 bytes) is then whole 16-byte vectors,
// so its codes and scales start 16-byte aligned.
bool q8_groups_fit(const Weight& w, size_t max_smem) {
  return w.dtype == DType::Q8_0 && w.layout == WeightLayout::Rows && w.rows % kQ8GroupRows == 0 &&
         w.cols % 64 == 0 && w.row_stride == static_cast<size_t>(w.cols / 32) * sizeof(BlockQ8_0) &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && group_bytes(w) <= max_smem;
}

void launch_pack_q8_groups(Weight& w, cudaStream_t stream) {
  const size_t smem = group_bytes(w);
  check(cudaFuncSetAttribute(pack_q8_groups_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem)),
        "q8_0 group packing shared memory");
  launch("pack q8_0 groups", pack_q8_groups_kernel, static_cast<unsigned>(w.rows / kQ8GroupRows),
         kThreads, smem, stream, static_cast<uint8_t*>(const_cast<void*>(w.data)), w.row_stride,
         w.cols);
  w.layout = WeightLayout::Q8Groups;
}

}  // namespace ts::cuda
