// Multi-head latent attention (DeepSeek-V3), in the absorbed form for prefill and decode alike. A
// token's keys and values are one latent of kv_lora_rank plus a rope key shared by the heads; the
// sequence keeps that row ([rope key | latent], MlaConfig::row_width()) and nothing per head. One
// layer's pass over a micro-batch:
//   q          = q_b(rms_norm(q_a(h))) (or q_proj(h)), per head [q_nope | q_pe]
//   row        = kv_a(h): [k_pe | rms_norm(latent)], k_pe rotated  -> the sequence's cache
//   query      = per head [rotated q_pe | k_b_h^T q_nope]: q_nope taken into the latent space,
//                so that query . row = q_pe . k_pe + q_nope . (k_b_h latent), the expanded score
//   att        = softmax(query . rows * scale) rows, per head, over the sequence's own rows
//   out        = o_proj(per head v_b_h (att's latent part))
// The value read is the whole row, so the attention also sums the rope keys it then drops: a
// qk_rope_head_dim / row_width() share of its value work (64 of 576 for DeepSeek-V3).
#pragma once

#include <cstdint>

#include "runtime/engine.h"
#include "runtime/kv_cache.h"
#include "runtime/mixers/mixer.h"

namespace ts {

class MlaMixer final : public Mixer {
 public:
  // Buffers for micro-batches of up to max_rows rows, from `scratch` (the forward's allocator).
  template <class Scratch>
  MlaMixer(Engine& engine, int64_t max_rows, Scratch&& scratch);

  void run(int64_t l, const PassRows& rows, const float* h, float* out) override;

  // Floats a row takes in this mixer's buffers.
  static int64_t row_floats(const ArchConfig& c);

 private:
  Engine& engine_;
  Backend& b_;
  const ArchConfig& c_;
  // [max_rows][width] each: the q latent, q's two parts, the cache rows, a latent alone, the
  // absorbed queries and the attention's output ([heads][row_width] a row), the heads' values.
  float *q_lat_ = nullptr, *q_nope_ = nullptr, *q_pe_ = nullptr, *kv_ = nullptr, *latent_ = nullptr,
        *query_ = nullptr, *att_ = nullptr, *values_ = nullptr;
};

template <class Scratch>
MlaMixer::MlaMixer(Engine& engine, int64_t max_rows, Scratch&& scratch)
    : engine_(engine), b_(engine.backend()), c_(engine.cfg()) {
  const MlaConfig& m = c_.mla;
  const auto B = static_cast<size_t>(max_rows), H = static_cast<size_t>(c_.n_head);
  const auto W = static_cast<size_t>(m.row_width());
  if (m.q_lora_rank > 0) q_lat_ = scratch(B * static_cast<size_t>(m.q_lora_rank));
  q_nope_ = scratch(B * H * static_cast<size_t>(m.qk_nope_head_dim));
  q_pe_ = scratch(B * H * static_cast<size_t>(m.qk_rope_head_dim));
  kv_ = scratch(B * W);
  latent_ = scratch(B * static_cast<size_t>(m.kv_lora_rank));
  query_ = scratch(B * H * W);
  att_ = scratch(B * H * W);
  values_ = scratch(B * H * static_cast<size_t>(m.v_head_dim));
}

}  // namespace ts
