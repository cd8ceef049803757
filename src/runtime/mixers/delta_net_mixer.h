// The Gated DeltaNet token mixer (Qwen3-Next, Qwen3.5): linear attention whose per-sequence state
// is a short convolution window and a decaying matrix updated by the delta rule, instead of KV
// rows. One layer's pass over a micro-batch:
//   qkv, z, beta, alpha = projections of the normed input
//   qkv = silu(causal depthwise conv(qkv))          per sequence, continuing its window
//   core = delta rule(q, k, v, beta, alpha)          per sequence, continuing its state
//   out = out_proj(rms_norm(core) * w * silu(z))     per value head
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/engine.h"
#include "runtime/kv_cache.h"
#include "runtime/mixers/mixer.h"

namespace ts {

class DeltaNetMixer final : public Mixer {
 public:
  // Buffers for micro-batches of up to max_rows rows, from `scratch` (the forward's allocator).
  template <class Scratch>
  DeltaNetMixer(Engine& engine, int64_t max_rows, Scratch&& scratch);

  // Each chunk's rows in order, its sequence's state read and updated.
  void run(int64_t l, const PassRows& rows, const float* h, float* out) override;

  // Floats a row takes in this mixer's buffers.
  static int64_t row_floats(const DeltaNetConfig& d);

 private:
  Engine& engine_;
  Backend& b_;
  const ArchConfig& c_;
  float *qkv_ = nullptr, *z_ = nullptr, *beta_ = nullptr, *alpha_ = nullptr, *core_ = nullptr;
};

template <class Scratch>
DeltaNetMixer::DeltaNetMixer(Engine& engine, int64_t max_rows, Scratch&& scratch)
    : engine_(engine), b_(engine.backend()), c_(engine.cfg()) {
  const DeltaNetConfig& d = c_.delta;
  const auto B = static_cast<size_t>(max_rows);
  qkv_ = scratch(B * static_cast<size_t>(d.conv_channels()));
  z_ = scratch(B * static_cast<size_t>(d.value_dim()));
  beta_ = scratch(B * static_cast<size_t>(d.n_v_heads));
  alpha_ = scratch(B * static_cast<size_t>(d.n_v_heads));
  core_ = scratch(B * static_cast<size_t>(d.value_dim()));
}

}  // namespace ts
