#include "runtime/per_layer_inputs.h"

#include <cmath>

namespace ts {

int64_t PerLayerInputs::row_floats(const ArchConfig& c) {
  if (c.n_embd_per_layer <= 0) return 0;
  return 2 * c.n_layer * c.n_embd_per_layer + 2 * c.n_embd_per_layer + c.n_embd;
}

void PerLayerInputs::prepare(const int32_t* ids, const float* x_emb, int64_t M) {
  const int64_t P = c_.n_embd_per_layer, L = c_.n_layer, W = L * P;
  b_.embed(engine_.per_layer_embd(), ids, M, std::sqrt(static_cast<float>(P)), tok_);
  b_.matmul(engine_.per_layer_model_proj(), x_emb, M, proj_);
  b_.scale(proj_, M * W, 1.0f / std::sqrt(static_cast<float>(c_.n_embd)));
  b_.rms_norm_heads(proj_, engine_.per_layer_proj_norm(), M, L, P, c_.rms_eps, false);
  b_.add(proj_, tok_, M * W);
  b_.scale(proj_, M * W, 1.0f / std::sqrt(2.0f));
  // By layer, so that a layer's slice is one [M][P] block (the gate's stride).
  for (int64_t l = 0; l < L; ++l) b_.copy_rows(tok_ + l * M * P, P, proj_ + l * P, W, M, P);
}

void PerLayerInputs::add(int64_t l, float* x, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t P = c_.n_embd_per_layer, d = c_.n_embd;
  b_.matmul(L.ple_gate, x, M, gate_);
  b_.glu(Glu::GeluTanh, gate_, tok_ + l * M * P, M, P, P, act_);
  b_.matmul(L.ple_proj, act_, M, out_);
  b_.rms_norm(out_, L.ple_norm, M, d, c_.rms_eps, false, out_);
  b_.add(x, out_, M * d);
}

}  // namespace ts
