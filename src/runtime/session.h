// Session: one sequence (its KV cache) and a forward driver sized for one micro-batch. A prompt
// goes through chunked prefill in micro-batches of up to prefill_batch tokens; decode is the
// one-token case of the same code path.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"

namespace ts {

class Session {
 public:
  explicit Session(Engine& engine);

  int64_t n_past() const { return kv_.n_past(); }
  int64_t ctx() const { return kv_.ctx(); }
  uint64_t kv_bytes() const { return kv_.bytes(); }
  int64_t engine_vocab() const { return vocab_; }
  void reset() { truncate(0); }
  // Forgets every position from n on (e.g. a rejected guess, or to reuse a shared prompt prefix).
  // A model with recurrent layers returns to its latest checkpoint at or before n and feeds the
  // tokens from there to n again.
  void truncate(int64_t n);
  // The pass this session runs (to make it one rank of several: Forward::expert_parallel).
  Forward& forward() { return forward_; }
  // Keeps the recurrent state at this position (see KvCache::checkpoint): before a pass that
  // truncate() may take back.
  void checkpoint() { kv_.checkpoint(); }

  // Feeds `n` tokens after the current position. `logits` (host) receives the next-token logits:
  // of every fed token ([n][vocab]) when all_rows, else of the last one ([vocab]).
  // `in`: what a multimodal prompt gives its rows besides the ids (seq_chunk.h), row i of it
  // for token i.
  void feed(const int32_t* tokens, int64_t n, float* logits, bool all_rows,
            const RowInputs& in = {});
  // Feeds `n` tokens and scores the next-token logits of rows [from, to) against targets[0 ..
  // to - from): nll[i] = -log softmax(logits of row from + i)[targets[i]] (host arrays). Only those
  // rows go through the head, and their logits stay where the backend computed them.
  void score(const int32_t* tokens, int64_t n, int64_t from, int64_t to, const int32_t* targets,
             double* nll);

 private:
  // The checks feed() and score() share before anything runs.
  void check_feed(const int32_t* tokens, int64_t n) const;

  int64_t vocab_;
  KvCache kv_;
  std::vector<int32_t> tokens_;  // of every position, to feed again after a rewind
  Forward forward_;
};

}  // namespace ts
