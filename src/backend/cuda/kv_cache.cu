// KV cache writes: row m of k and v goes to cache row pos[m], converted to the cache's type; in a
// decode step of several sequences, to the cache of row m's own sequence.
// The conversion: kv_store.cuh.
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_store.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/warp.cuh"

namespace ts::cuda {
namespace {

constexpr int kThreads = 256;

// Row m goes to the cache (kc, vc), or with `each` to row m's own (each[m].k, each[m].v).
template <DType T>
__global__ void kv_store_kernel(uint8_t* kc, uint8_t* vc, const KvView* each, size_t row_bytes,
                                int64_t width, const float* k, const float* v, const int32_t* pos) {
  pdl_enter();
  const int64_t m = blockIdx.y;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const float* src = (blockIdx.z == 0 ? k : v) + m * width;
  if (each != nullptr) {
    kc = static_cast<uint8_t*>(each[m].k);
    vc = static_cast<uint8_t*>(each[m].v);
  }
  uint8_t* row = (blockIdx.z == 0 ? kc : vc) + static_cast<size_t>(pos[m]) * row_bytes;
  if (e >= width) return;  // width is a multiple of 32 and so is kThreads: whole warps leave
  const float x = src[e];
  // q8_0: each warp holds exactly one block.
  const float amax = T == DType::Q8_0 ? warp_max(fabsf(x)) : 0.0f;
  put_kv<T>(row, e, x, amax);
}

}  // namespace

void launch_kv_store(const KvView& kv, const KvView* each, const float* k, const float* v,
                     int64_t M, const int32_t* pos, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((kv.width + kThreads - 1) / kThreads),
                  static_cast<unsigned>(M), 2);
  auto* kc = static_cast<uint8_t*>(kv.k);
  auto* vc = static_cast<uint8_t*>(kv.v);
  dispatch_kv_type(kv.dtype, [&]<DType T>() {
    launch("kv store", kv_store_kernel<T>, grid, kThreads, 0, stream, kc, vc, each, kv.row_bytes,
           kv.width, k, v, pos);
  });
}

}  // namespace ts::cuda
