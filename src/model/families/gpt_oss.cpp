// gpt-oss: sliding-window (every other layer, the first included) and full attention layers with
// attention sinks and biases on q, k, v and o; YaRN rope; every layer MoE, the router a linear
// layer with a bias, top-k of its logits softmaxed over the k chosen; experts with biases and
// a clamped SwiGLU.
#include "model/config_view.h"
#include "model/family.h"

namespace ts {
namespace {

// Which layers slide: HF's layer_types; GGUF's per-layer array or period (llama.cpp: layer l
// slides when l % period < period - 1; gpt-oss's converter writes neither, the period is 2).
void read_layer_pattern(const ConfigView& v, ArchConfig& c) {
  const auto n = static_cast<size_t>(c.n_layer);
  if (!v.is_gguf()) return read_hf_sliding_layers(v, c);
  if (const auto per_layer = v.opt_gguf_ints("attention.sliding_window_pattern")) {
    if (per_layer->size() != n)
      v.invalid(
          "attention.sliding_window_pattern",
          std::to_string(per_layer->size()) + " entries for " + std::to_string(n) + " layers");
    for (size_t l = 0; l < n; ++l) c.layer_sliding[l] = (*per_layer)[l] != 0;
    return;
  }
  const int64_t period = v.opt_int("attention.sliding_window_pattern", nullptr).value_or(2);
  if (period <= 0) v.invalid("attention.sliding_window_pattern", "must be positive");
  for (size_t l = 0; l < n; ++l) c.layer_sliding[l] = static_cast<int64_t>(l) % period < period - 1;
}

}  // namespace

void configure_gpt_oss(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  read_moe_common(v, c, "num_local_experts");
  if (!v.is_gguf()) read_hf_rope_scaling(v, c, "rope_parameters");
  // The GGUF has no key for YaRN's truncation; gpt-oss's own config sets `truncate: false`
  // (llama.cpp truncates regardless, which its logits show).
  if (v.is_gguf()) c.rope_yarn_truncate = false;
  c.rope_local_scaled = true;
  c.qkv_bias = true;
  c.attn_out_bias = true;
  c.attn_sinks = true;
  c.sliding_window = v.req_int("attention.sliding_window", "sliding_window");
  read_layer_pattern(v, c);
  c.router = RouterScoring::TopkSoftmax;
  c.router_logit_bias = true;
  c.expert_bias = true;
  c.ffn_act = FfnActivation::SwiGluClamped;
  // transformers' GptOssConfig defaults; llama.cpp hard-codes the same two.
  c.swiglu_alpha = static_cast<float>(v.opt_float(nullptr, "swiglu_alpha").value_or(1.702));
  c.swiglu_limit = static_cast<float>(v.opt_float("swiglu_limit", "swiglu_limit").value_or(7.0));
}

}  // namespace ts
