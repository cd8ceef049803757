// Session: one sequence's KV cache and position over an Engine, and the forward driver. A prompt
// goes through chunked prefill in micro-batches of up to prefill_batch tokens; decode is the
// one-token case of the same code path.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "runtime/engine.h"

namespace ts {

class Session {
 public:
  explicit Session(Engine& engine);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int64_t n_past() const { return n_past_; }
  int64_t ctx() const { return ctx_; }
  int64_t engine_vocab() const { return c_.n_vocab; }
  uint64_t kv_bytes() const { return kv_bytes_; }
  void reset() { n_past_ = 0; }
  // Forgets every position from n on (e.g. to reuse a shared prompt prefix).
  void truncate(int64_t n);

  // Feeds `n` tokens after the current position. `logits` (host) receives the next-token logits:
  // of every fed token ([n][vocab]) when all_rows, else of the last one ([vocab]).
  void feed(const int32_t* tokens, int64_t n, float* logits, bool all_rows);

 private:
  void forward_batch(const int32_t* ids, int64_t M, float* logits, bool all_rows);
  void attention_block(int64_t l, int64_t M);
  void ffn_dense(int64_t l, int64_t M);
  void ffn_moe(int64_t l, int64_t M);

  float* scratch(size_t floats);

  Engine& engine_;
  Backend& b_;
  const ArchConfig& c_;
  int64_t ctx_ = 0;
  int64_t batch_ = 0;
  int64_t n_past_ = 0;
  uint64_t kv_bytes_ = 0;
  std::vector<KvView> kv_;
  std::vector<void*> buffers_;
  std::vector<int32_t> pos_;
  // activations, [batch][width] in backend memory
  float *x_ = nullptr, *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *att_ = nullptr, *o_ = nullptr;
  float *ff_gate_ = nullptr, *ff_up_ = nullptr, *ff_act_ = nullptr, *ff_out_ = nullptr, *rows_ = nullptr;
  float *router_ = nullptr, *logits_ = nullptr;
  std::vector<float> router_host_;
};

}  // namespace ts
