// Rearranging uploaded q6_k weights into WeightLayout::Q6Rows (q6_rows.cuh), in place.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q6_rows.cuh"
#include "quant/blocks.h"

namespace ts::cuda {
namespace {

constexpr int kThreads = 256;
// Every field of a q6_k block is a whole number of 2-byte words: the rows move in words.
constexpr int kBlockWords = sizeof(BlockQ6_K) / 2, kBodyWords = kQ6Body / 2;

// One block per group of `rows` rows: the group is read into shared memory whole before any byte
// of it is written back in the new order.
__global__ void __launch_bounds__(kThreads)
    pack_q6_rows_kernel(uint8_t* w, size_t row_stride, int64_t rows, int64_t blocks) {
  pdl_enter();
  extern __shared__ __align__(16) uint8_t stage[];
  const size_t bytes = rows * row_stride;
  uint8_t* group = w + static_cast<size_t>(blockIdx.x) * bytes;
  for (size_t i = threadIdx.x; i < bytes / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(stage)[i] = reinterpret_cast<const uint4*>(group)[i];
  __syncthreads();
  const auto* in = reinterpret_cast<const uint16_t*>(stage);
  auto* out = reinterpret_cast<uint16_t*>(group);
  const int64_t group_blocks = rows * blocks;  // rows are whole blocks back to back in the file
  for (int64_t i = threadIdx.x; i < group_blocks * kBlockWords; i += blockDim.x) {
    const int64_t b = i / kBlockWords, k = i % kBlockWords;  // word k of block b; the last is d
    out[k < kBodyWords ? b * kBodyWords + k : group_blocks * kBodyWords + b] = in[i];
  }
}

}  // namespace

bool q6_rows_fit(const Weight& w, size_t max_smem) {
  if (w.dtype != DType::Q6_K || w.layout != WeightLayout::Rows || w.cols % kQKK != 0) return false;
  const int64_t rows = q6_group_rows(w.cols);
  return w.row_stride == static_cast<size_t>(w.cols / kQKK) * sizeof(BlockQ6_K) &&
         w.rows % rows == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0 &&
         static_cast<size_t>(rows) * w.row_stride <= max_smem;
}

void launch_pack_q6_rows(Weight& w, cudaStream_t stream) {
  const int64_t rows = q6_group_rows(w.cols);
  const size_t smem = static_cast<size_t>(rows) * w.row_stride;
  check(cudaFuncSetAttribute(pack_q6_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem)),
        "q6_k row packing shared memory");
  launch("pack q6_k rows", pack_q6_rows_kernel, static_cast<unsigned>(w.rows / rows), kThreads,
         smem, stream, static_cast<uint8_t*>(const_cast<void*>(w.data)), w.row_stride, rows,
         w.cols / kQKK);
  w.layout = WeightLayout::Q6Rows;
}

}  // namespace ts::cuda
