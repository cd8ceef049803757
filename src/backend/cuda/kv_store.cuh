// One element of a KV cache row on the device, converted to the cache's type: the one definition
// of kv_store_kernel (kv_cache.cu) and of the decode's rope_kv_store_kernel (elementwise.cu), so
// that both write the same bytes. q8_0 rows are GGML q8_0 blocks of 32 along the row: an f16
// scale d = max|x| / 127 and int8 round-half-away(x / d), computed as the CPU backend does (x
// times 1/d in f32); the caller reduces `amax`, the largest magnitude in e's block, over the
// threads that hold the block (the other types ignore it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "quant/blocks.h"

namespace ts::cuda {

template <DType T>
__device__ __forceinline__ void put_kv(uint8_t* row, int64_t e, float x, float amax) {
  if constexpr (T == DType::Q8_0) {
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* blk = row + (e / kQK32) * sizeof(BlockQ8_0);
    blk[2 + e % kQK32] = static_cast<uint8_t>(static_cast<int8_t>(lroundf(x * id)));
    if (e % kQK32 == 0) *reinterpret_cast<__half*>(blk) = __float2half_rn(d);
  } else if constexpr (T == DType::F32) {
    reinterpret_cast<float*>(row)[e] = x;
  } else if constexpr (T == DType::F16) {
    reinterpret_cast<__half*>(row)[e] = __float2half_rn(x);
  } else {
    reinterpret_cast<__nv_bfloat16*>(row)[e] = __float2bfloat16_rn(x);
  }
}

// f.template operator()<T>() for the cache type t (f32, f16, bf16, else q8_0).
template <class F>
void dispatch_kv_type(DType t, F&& f) {
  switch (t) {
    case DType::F32:
      f.template operator()<DType::F32>();
      break;
    case DType::F16:
      f.template operator()<DType::F16>();
      break;
    case DType::BF16:
      f.template operator()<DType::BF16>();
      break;
    default:
      f.template operator()<DType::Q8_0>();
      break;
  }
}

}  // namespace ts::cuda
