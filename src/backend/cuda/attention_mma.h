// Tensor-core prefill attention (attention_mma.cu) for f16 and bf16 KV caches. Only attention.cu
// includes this: launch_attention_prefill tries it first and keeps its f32 kernel for the rest.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/backend.h"

namespace ts::cuda {

// Queues the kernel and returns true when it handles this cache and shape: an f16 or bf16 cache
// with 16-byte aligned rows and head slices, head_dim 64, 128 or 256. Returns false (queuing
// nothing) otherwise. Same arguments and result layout as launch_attention_prefill.
bool launch_attention_prefill_mma(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                                  const AttentionArgs& a, float* out, cudaStream_t stream);

}  // namespace ts::cuda
