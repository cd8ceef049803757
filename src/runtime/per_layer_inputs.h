// Per-layer embeddings (Gemma 4's E2B / E4B): each token brings, besides its embedding, a row of
// n_layer x n_embd_per_layer values from a second table, mixed at the start of a pass with a
// projection of the token's embedding:
//   ple[l] = (rms_norm(W_model x_emb / sqrt(n_embd))_l * w + table[token]_l * sqrt(P)) / sqrt(2)
// and after layer l's FFN its slice is gated into the residual stream:
//   x += rms_norm(W_proj (gelu(W_gate x) * ple[l])) * w_post
// The table is read a row a token where the file lies (Engine::per_layer_embd), not resident.
#pragma once

#include <cstdint>

#include "runtime/engine.h"

namespace ts {

class PerLayerInputs {
 public:
  // Buffers for micro-batches of up to max_rows rows, from `scratch` (the forward's allocator).
  template <class Scratch>
  PerLayerInputs(Engine& engine, int64_t max_rows, Scratch&& scratch);

  // Floats a row of a micro-batch takes in these buffers (the footprint's workspace).
  static int64_t row_floats(const ArchConfig& c);

  // The pass's per-layer inputs of its M tokens `ids` (host), x_emb [M][n_embd] their embeddings.
  void prepare(const int32_t* ids, const float* x_emb, int64_t M);
  // Layer l's per-layer input into the residual stream x [M][n_embd].
  void add(int64_t l, float* x, int64_t M);

 private:
  Engine& engine_;
  Backend& b_;
  const ArchConfig& c_;
  // [max_rows][n_layer * P] each: the table's rows, then (reused) the inputs by layer,
  // [n_layer][M][P]; the projection; and [max_rows][P] gate, activation; [max_rows][n_embd] out.
  float *tok_ = nullptr, *proj_ = nullptr, *gate_ = nullptr, *act_ = nullptr, *out_ = nullptr;
};

template <class Scratch>
PerLayerInputs::PerLayerInputs(Engine& engine, int64_t max_rows, Scratch&& scratch)
    : engine_(engine), b_(engine.backend()), c_(engine.cfg()) {
  const auto B = static_cast<size_t>(max_rows), P = static_cast<size_t>(c_.n_embd_per_layer);
  const size_t W = static_cast<size_t>(c_.n_layer) * P;
  tok_ = scratch(B * W);
  proj_ = scratch(B * W);
  gate_ = scratch(B * P);
  act_ = scratch(B * P);
  out_ = scratch(B * static_cast<size_t>(c_.n_embd));
}

}  // namespace ts
