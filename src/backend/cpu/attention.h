// CPU attention over the KV cache: split-KV (flash-decoding) partials combined by max /
// denominator / output, shared by prefill and decode; GQA heads of one kv head are processed
// together so each key row is converted once per group. The tiles are attention_tile.h's.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace ts::cpu {

// Converts one row of `width` floats into the cache's storage type at `dst`.
void store_kv_row(DType dtype, const float* src, int64_t width, uint8_t* dst);

void attention(ThreadPool& pool, const float* q, const KvView& kv, int64_t M, const int32_t* pos,
               const AttentionArgs& a, float* out);

}  // namespace ts::cpu
