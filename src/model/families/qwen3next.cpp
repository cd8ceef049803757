// qwen3next, qwen35, qwen35moe: hybrid stacks. Most layers mix tokens with Gated DeltaNet, one in
// full_attention_interval with gated full attention (an output gate from the q projection,
// per-head q/k norm, partial rotary). Zero-centred RMS norms x * (1 + w) (the GGUF stores 1 + w;
// the DeltaNet's own gated norm keeps plain weights in both). The MoE variants route with a softmax
// over all experts, top-k renormalised, beside a shared expert scaled by sigmoid(x . gate).
#include <cmath>
#include <nlohmann/json.hpp>

#include "model/config_view.h"
#include "model/family.h"

namespace ts {
namespace {

void read_delta_net(const ConfigView& v, ArchConfig& c) {
  DeltaNetConfig& d = c.delta;
  d.conv_kernel = v.req_int("ssm.conv_kernel", "linear_conv_kernel_dim");
  d.k_head_dim = v.req_int("ssm.state_size", "linear_key_head_dim");
  d.n_k_heads = v.req_int("ssm.group_count", "linear_num_key_heads");
  d.n_v_heads = v.req_int("ssm.time_step_rank", "linear_num_value_heads");
  if (v.is_gguf()) {
    const int64_t inner = v.req_int("ssm.inner_size", nullptr);
    if (d.n_v_heads <= 0 || inner % d.n_v_heads != 0)
      v.invalid("ssm.inner_size", std::to_string(inner) + " is not a multiple of the " +
                                      std::to_string(d.n_v_heads) + " value heads");
    d.v_head_dim = inner / d.n_v_heads;
  } else {
    d.v_head_dim = v.req_int(nullptr, "linear_value_head_dim");
  }
  // llama.cpp's converter reorders Qwen3.5's value heads to tiled order (its Qwen3-Next files
  // keep the checkpoint's grouped order); HF checkpoints are grouped.
  d.v_heads_tiled = v.is_gguf() && c.family != Family::Qwen3Next;
}

// Which layers are full attention: a per-layer list when the source has one, else every
// full_attention_interval-th layer (the GGUF converter's default interval is 4).
void read_layer_pattern(const ConfigView& v, ArchConfig& c) {
  const auto n = static_cast<size_t>(c.n_layer);
  if (v.is_gguf()) {
    if (const auto recurrent = v.opt_gguf_ints("attention.recurrent_layers")) {
      if (recurrent->size() != n)
        v.invalid("attention.recurrent_layers", "expected one entry per layer");
      for (size_t l = 0; l < n; ++l)
        c.layer_mixer[l] = (*recurrent)[l] != 0 ? MixerKind::DeltaNet : MixerKind::Attention;
      return;
    }
  } else if (const nlohmann::json* types = v.hf_value("layer_types")) {
    if (!types->is_array() || types->size() != n)
      v.invalid("layer_types", "expected one entry per layer");
    for (size_t l = 0; l < n; ++l) {
      const auto& t = (*types)[l];
      if (t != "linear_attention" && t != "full_attention")
        v.invalid("layer_types", "entry " + std::to_string(l) +
                                     " is neither \"linear_attention\" nor \"full_attention\"");
      c.layer_mixer[l] = t == "linear_attention" ? MixerKind::DeltaNet : MixerKind::Attention;
    }
    return;
  }
  const int64_t interval =
      v.opt_int("full_attention_interval", "full_attention_interval").value_or(4);
  if (interval <= 0) v.invalid("full_attention_interval", "must be positive");
  for (size_t l = 0; l < n; ++l)
    c.layer_mixer[l] =
        (static_cast<int64_t>(l) + 1) % interval == 0 ? MixerKind::Attention : MixerKind::DeltaNet;
}

void read_rotary(const ConfigView& v, ArchConfig& c) {
  if (v.is_gguf()) {
    c.rotary_dim = v.req_int("rope.dimension_count", nullptr);
    return;
  }
  read_hf_rope_scaling(v, c, "rope_parameters");
  auto factor = v.opt_float(nullptr, "rope_parameters/partial_rotary_factor");
  if (!factor) factor = v.opt_float(nullptr, "partial_rotary_factor");
  // transformers: int(head_dim * partial_rotary_factor) dimensions are rotated.
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * factor.value_or(1.0));
}

void read_hybrid(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  c.qk_norm = QkNorm::PerHead;
  c.attn_output_gate = true;
  c.norm_plus_one = !v.is_gguf();
  read_delta_net(v, c);
  read_layer_pattern(v, c);
  read_rotary(v, c);
}

void read_shared_expert_moe(const ConfigView& v, ArchConfig& c) {
  read_moe_common(v, c, "num_experts");
  c.router = RouterScoring::SoftmaxTopk;
  c.norm_topk_prob = v.is_gguf() || v.opt_bool(nullptr, "norm_topk_prob").value_or(true);
  c.n_ff_shared = v.req_int("expert_shared_feed_forward_length", "shared_expert_intermediate_size");
  c.shared_expert_gate = true;
  if (v.is_gguf()) return;
  if (const nlohmann::json* dense = v.hf_value("mlp_only_layers"))
    if (!dense->is_array() || !dense->empty())
      v.invalid("mlp_only_layers", "dense layers in a Qwen3-Next stack are not supported");
  if (v.opt_int(nullptr, "decoder_sparse_step").value_or(1) != 1)
    v.invalid("decoder_sparse_step", "only 1 (every layer MoE) is supported");
}

}  // namespace

void configure_qwen3next(const ConfigView& v, ArchConfig& c) {
  read_hybrid(v, c);
  read_shared_expert_moe(v, c);
}

void configure_qwen35(const ConfigView& v, ArchConfig& c) {
  read_hybrid(v, c);
  if (c.family == Family::Qwen35Moe) read_shared_expert_moe(v, c);
}

}  // namespace ts
