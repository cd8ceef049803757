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

// The largest buffer of split states attention() keeps from call to call on its calling thread
// (a decode's splits over up to `keys` cached positions, for any row count up to `max_rows`), by
// the same rules: what a footprint counts for it.
uint64_t attention_kept_bytes(const AttentionArgs& a, int64_t keys, int64_t max_rows, int threads);
// The same for bidirectional attention over texts of up to `max_rows` rows, each row reading
// every key of its text (host_ops.h full_attention: as many keys as rows).
uint64_t full_attention_kept_bytes(const AttentionArgs& a, int64_t max_rows, int threads);
// The bytes the calling thread keeps now (tests hold attention_kept_bytes against it).
uint64_t attention_kept_now();

}  // namespace ts::cpu
