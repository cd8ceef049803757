// Softmax attention over each sequence's KV rows (full or sliding window, optionally with an output
// gate from the q projection). One layer's pass over a micro-batch:
//   q, k, v = projections of the normed input (one stacked matmul for a single token)
//   q, k    = per-head or whole-projection RMS norm, then rotary embeddings
//   k, v    -> the sequence's KV rows at the rows' positions
//   att     = softmax(q k^T * scale) v per head, over each sequence's own rows (a head's sink
//             logit, where the model has them, joining each softmax's denominator)
//   out     = o_proj(att), or o_proj(att * sigmoid(gate)) with an output gate (+ o_proj's bias)
// Layers may differ in head_dim and kv heads (their AttentionArgs say); a layer may RMS-norm v per
// head (LayerWeights::v_norm), take v from its k projection (no wv: k = v), or read an earlier
// layer's KV rows and store none (no wk: KV sharing, the cache's view of it being that layer's).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/engine.h"
#include "runtime/footprint.h"
#include "runtime/kv_cache.h"
#include "runtime/mixers/mixer.h"

namespace ts {

class AttentionMixer final : public Mixer {
 public:
  // Buffers for micro-batches of up to max_rows rows, from `scratch` (the forward's allocator).
  template <class Scratch>
  AttentionMixer(Engine& engine, int64_t max_rows, Scratch&& scratch);

  // Before a batched decode step's layers run (outside a recording: a replay re-reads them): each
  // layer's caches of the step's sequences, in their order.
  void prepare_step(const std::vector<SeqChunk>& chunks);
  void run(int64_t l, const PassRows& rows, const float* h, float* out) override;

 private:
  // Layer l's k and v rows (rotated) into the caches and the attention of the q rows into att_.
  // k null: the layer stores nothing and attends over the rows its cache view holds.
  void store_and_attend(int64_t l, const PassRows& rows, const float* q, const float* k,
                        const float* v);

  Engine& engine_;
  Backend& b_;
  const ArchConfig& c_;
  // [max_rows][width] each; k_ and v_ point into q_'s buffer (a stacked matmul writes a token's
  // q, k, v (and gate) side by side)
  float *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *att_ = nullptr, *gate_ = nullptr;
  std::vector<KvView> step_kv_;   // [n_layer][kDecodeStepRows]
  std::vector<int32_t> key_end_;  // a chunk's AttentionArgs::key_end
};

template <class Scratch>
AttentionMixer::AttentionMixer(Engine& engine, int64_t max_rows, Scratch&& scratch)
    : engine_(engine), b_(engine.backend()), c_(engine.cfg()) {
  const auto B = static_cast<size_t>(max_rows);
  const auto qw = static_cast<size_t>(c_.max_q_width()),
             kvw = static_cast<size_t>(c_.max_kv_width());
  // One token's output gate after its q, k and v: one row more of q width.
  const size_t gw = c_.attn_output_gate ? qw : 0;
  q_ = scratch(B * (qw + 2 * kvw) + gw);
  k_ = q_ + B * qw;
  v_ = k_ + B * kvw;
  att_ = scratch(B * qw);
  if (c_.attn_output_gate) gate_ = scratch(B * qw);
  step_kv_.resize(static_cast<size_t>(c_.n_layer * kDecodeStepRows));
}

}  // namespace ts
