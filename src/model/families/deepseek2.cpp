// deepseek2 (GGUF) / DeepseekV3ForCausalLM (HF): DeepSeek-V3 / R1. Multi-head latent attention in
// every layer (q through a LoRA path, k and v from one shared latent plus a shared rope key, rope
// on adjacent pairs); the first first_k_dense_replace layers a dense SwiGLU, the rest routed
// experts chosen by sigmoid scores plus a correction bias within the best groups, their weights
// the unbiased scores renormalised and times routed_scaling_factor, beside always-on shared
// experts. YaRN scales the scores by mscale_all_dim's mscale squared.
#include <cmath>
#include <nlohmann/json.hpp>

#include "model/config_view.h"
#include "model/family.h"

namespace ts {
namespace {

void read_mla(const ConfigView& v, ArchConfig& c) {
  MlaConfig& m = c.mla;
  m.q_lora_rank = v.opt_int("attention.q_lora_rank", "q_lora_rank").value_or(0);
  m.kv_lora_rank = v.req_int("attention.kv_lora_rank", "kv_lora_rank");
  m.qk_rope_head_dim = v.req_int("rope.dimension_count", "qk_rope_head_dim");
  if (v.is_gguf()) {
    // Newer converters state the MLA widths apart (key_length is then the absorbed row's).
    auto key = v.opt_int("attention.key_length_mla", nullptr);
    if (!key) key = v.req_int("attention.key_length", nullptr);
    auto value = v.opt_int("attention.value_length_mla", nullptr);
    if (!value) value = v.req_int("attention.value_length", nullptr);
    m.qk_nope_head_dim = *key - m.qk_rope_head_dim;
    m.v_head_dim = *value;
  } else {
    m.qk_nope_head_dim = v.req_int(nullptr, "qk_nope_head_dim");
    m.v_head_dim = v.req_int(nullptr, "v_head_dim");
  }
  c.head_dim = m.qk_head_dim();
  c.rotary_dim = m.qk_rope_head_dim;
  // Every head reads the one latent row of a token: one KV head.
  c.n_head_kv = 1;
  c.layer_mixer.assign(c.layer_mixer.size(), MixerKind::Mla);
  // llama.cpp rotates deepseek2's rope dims in adjacent pairs on the checkpoint's layout;
  // transformers does the same when rope_interleave is set (its default).
  c.rope_pairing = !v.is_gguf() && v.opt_bool(nullptr, "rope_interleave") == false
                       ? RopePairing::NeoX
                       : RopePairing::Adjacent;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(m.qk_head_dim()));
}

}  // namespace

void read_deepseek_routing(const ConfigView& v, ArchConfig& c) {
  read_moe_common(v, c, "n_routed_experts");
  c.router = RouterScoring::SigmoidGroupTopk;
  c.router_bias = true;
  c.n_group = v.opt_int("expert_group_count", "n_group").value_or(1);
  c.topk_group = v.opt_int("expert_group_used_count", "topk_group").value_or(1);
  c.routed_scale =
      static_cast<float>(v.opt_float("expert_weights_scale", "routed_scaling_factor").value_or(1));
  c.norm_topk_prob = v.opt_bool("expert_weights_norm", "norm_topk_prob").value_or(false);
  const int64_t shared = v.opt_int("expert_shared_count", "n_shared_experts").value_or(0);
  if (shared < 0) v.invalid("n_shared_experts", std::to_string(shared) + " is negative");
  // n shared experts are one GLU n times as wide.
  c.n_ff_shared = shared * c.n_ff_expert;
  const int64_t dense = v.opt_int("leading_dense_block_count", "first_k_dense_replace").value_or(0);
  if (dense < 0 || dense > c.n_layer)
    v.invalid("first_k_dense_replace",
              std::to_string(dense) + " is not within [0, " + std::to_string(c.n_layer) + "]");
  for (int64_t l = 0; l < dense; ++l) c.layer_moe[static_cast<size_t>(l)] = 0;
  if (v.is_gguf()) {
    // Without the key llama.cpp falls back to softmax gating (DeepSeek-V2's): refused rather
    // than guessed.
    const int64_t gating = v.req_int("expert_gating_func", nullptr);
    if (gating != 2)
      v.invalid("expert_gating_func",
                std::to_string(gating) + " (only 2 = sigmoid, DeepSeek-V3's, is supported)");
    return;
  }
  const auto scoring = v.opt_string(nullptr, "scoring_func");
  if (scoring && *scoring != "sigmoid")
    v.invalid("scoring_func", "'" + *scoring + "' (only \"sigmoid\", DeepSeek-V3's, is supported)");
  const auto method = v.opt_string(nullptr, "topk_method");
  if (method && *method != "noaux_tc")
    v.invalid("topk_method", "'" + *method + "' (only \"noaux_tc\", DeepSeek-V3's, is supported)");
}

void configure_deepseek2(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  if (!v.is_gguf()) {
    read_hf_rope_scaling(v, c, "rope_parameters");
    // transformers' DeepSeek attention: mscale_all_dim's mscale squared on the scores.
    const nlohmann::json* p = v.hf_value("rope_parameters");
    if (p == nullptr) p = v.hf_value("rope_scaling");
    if (c.rope_scaling == RopeScaling::Yarn && p != nullptr && p->is_object()) {
      const auto it = p->find("mscale_all_dim");
      if (it != p->end() && it->is_number() && it->get<double>() != 0) {
        const float m = yarn_mscale(c.rope_factor, it->get<double>());
        c.yarn_score_factor = m * m;
      }
    }
  }
  read_mla(v, c);
  read_deepseek_routing(v, c);
}

}  // namespace ts
