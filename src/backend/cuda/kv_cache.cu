// KV cache writes: row m of k and v goes to cache row pos[m], converted to the cache's type; in a
// decode step of several sequences, to the cache of row m's own sequence.
// q8_0 rows are GGML q8_0 blocks of 32 along the row: an f16 scale d = max|x| / 127 and
// int8 round-half-away(x / d), computed as the CPU backend does (x times 1/d in f32).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "quant/blocks.h"

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
  if constexpr (T == DType::Q8_0) {
    // width is a multiple of 32 and so is kThreads: each warp holds exactly one block.
    if (e >= width) return;
    const float x = src[e];
    float amax = fabsf(x);
    for (int off = 16; off > 0; off >>= 1)
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* blk = row + (e / kQK32) * sizeof(BlockQ8_0);
    blk[2 + e % kQK32] = static_cast<uint8_t>(static_cast<int8_t>(lroundf(x * id)));
    if (e % kQK32 == 0) *reinterpret_cast<__half*>(blk) = __float2half_rn(d);
  } else {
    if (e >= width) return;
    if constexpr (T == DType::F32)
      reinterpret_cast<float*>(row)[e] = src[e];
    else if constexpr (T == DType::F16)
      reinterpret_cast<__half*>(row)[e] = __float2half_rn(src[e]);
    else
      reinterpret_cast<__nv_bfloat16*>(row)[e] = __float2bfloat16_rn(src[e]);
  }
}

}  // namespace

void launch_kv_store(const KvView& kv, const KvView* each, const float* k, const float* v,
                     int64_t M, const int32_t* pos, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((kv.width + kThreads - 1) / kThreads),
                  static_cast<unsigned>(M), 2);
  auto* kc = static_cast<uint8_t*>(kv.k);
  auto* vc = static_cast<uint8_t*>(kv.v);
  const auto store = [&](auto kernel) {
    launch("kv store", kernel, grid, kThreads, 0, stream, kc, vc, each, kv.row_bytes, kv.width, k,
           v, pos);
  };
  switch (kv.dtype) {
    case DType::F32:
      store(kv_store_kernel<DType::F32>);
      break;
    case DType::F16:
      store(kv_store_kernel<DType::F16>);
      break;
    case DType::BF16:
      store(kv_store_kernel<DType::BF16>);
      break;
    default:
      store(kv_store_kernel<DType::Q8_0>);
      break;
  }
}

}  // namespace ts::cuda
