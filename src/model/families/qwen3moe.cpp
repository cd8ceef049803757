// qwen3moe: qwen3 attention; softmax over all experts, then top-k.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/config_view.h"
#include "model/family.h"

namespace ts {

void read_qwen3moe_experts(const ConfigView& v, ArchConfig& c) {
  read_moe_common(v, c, "num_experts");
  c.router = RouterScoring::SoftmaxTopk;
  if (v.is_gguf()) {
    // The GGUF has no key for it; llama.cpp's qwen3moe always renormalises (explicit default).
    c.norm_topk_prob = true;
    return;
  }
  c.norm_topk_prob = v.opt_bool(nullptr, "norm_topk_prob").value_or(false);
  // A layer is sparse unless listed in mlp_only_layers, every decoder_sparse_step-th layer.
  const int64_t step = v.opt_int(nullptr, "decoder_sparse_step").value_or(1);
  if (step <= 0) v.invalid("decoder_sparse_step", "must be positive");
  std::vector<int64_t> dense_only;
  if (const auto* m = v.hf_value("mlp_only_layers")) {
    if (!m->is_array()) v.invalid("mlp_only_layers", "expected a list of layer indices");
    for (const auto& x : *m) {
      if (!x.is_number_integer()) v.invalid("mlp_only_layers", "expected integers");
      dense_only.push_back(x.get<int64_t>());
    }
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const bool dense = std::find(dense_only.begin(), dense_only.end(), l) != dense_only.end();
    c.layer_moe[static_cast<size_t>(l)] = (!dense && c.n_expert > 0 && (l + 1) % step == 0) ? 1 : 0;
  }
}

void configure_qwen3moe(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  c.qk_norm = QkNorm::PerHead;
  if (!v.is_gguf()) read_hf_rope_scaling(v, c, "rope_parameters");
  read_qwen3moe_experts(v, c);
}

}  // namespace ts
