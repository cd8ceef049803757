// glm4moe (GGUF) / Glm4MoeForCausalLM (HF): GLM-4.5 / 4.6 / 4.7. DeepSeek-V3's routing (sigmoid
// scores with a correction bias chosen within the best groups, routed_scaling_factor, a shared
// expert, leading dense layers) on GQA attention with q/k/v biases, partial rotary (NeoX pairs
// over the first rotary_dim elements of a head) and an optional per-head q/k RMS norm. The
// checkpoints carry num_nextn_predict_layers multi-token-prediction layers after the decoder's:
// not run, so not read (llama.cpp's converter counts them in block_count).
#include <cmath>

#include "model/config_view.h"
#include "model/family.h"

namespace ts {
namespace {

// The MTP layers are the GGUF's last blocks: the decoder is the ones before them.
void drop_gguf_nextn_layers(const ConfigView& v, ArchConfig& c) {
  const int64_t nextn = v.opt_int("nextn_predict_layers", nullptr).value_or(0);
  if (nextn < 0 || nextn >= c.n_layer)
    v.invalid("nextn_predict_layers", std::to_string(nextn) + " is not within [0, block_count " +
                                          std::to_string(c.n_layer) + ")");
  c.n_layer -= nextn;
  const auto n = static_cast<size_t>(c.n_layer);
  c.layer_sliding.resize(n);
  c.layer_moe.resize(n);
  c.layer_mixer.resize(n);
}

void read_hf_attention(const ConfigView& v, ArchConfig& c) {
  read_hf_rope_scaling(v, c, "rope_parameters");
  auto factor = v.opt_float(nullptr, "rope_parameters/partial_rotary_factor");
  if (!factor) factor = v.opt_float(nullptr, "partial_rotary_factor");
  // transformers' Glm4MoeConfig defaults the factor to 0.5 (llama.cpp's converter too).
  const double f = factor.value_or(0.5);
  if (!(f > 0 && f <= 1)) v.invalid("partial_rotary_factor", "must be within (0, 1]");
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * f);
  c.qkv_bias = v.opt_bool(nullptr, "attention_bias").value_or(false);
  c.qk_norm = v.opt_bool(nullptr, "use_qk_norm").value_or(false) ? QkNorm::PerHead : QkNorm::None;
}

// llama.cpp's converter writes no key for the biases or the q/k norm: it (and llama.cpp's loader)
// tells them by the first layer's tensors; every layer must then have them.
void read_gguf_attention(const ConfigView& v, ArchConfig& c) {
  c.rotary_dim = v.req_int("rope.dimension_count", nullptr);
  c.qkv_bias = v.has_tensor("blk.0.attn_q.bias");
  c.qk_norm = v.has_tensor("blk.0.attn_q_norm.weight") ? QkNorm::PerHead : QkNorm::None;
}

}  // namespace

void configure_glm4moe(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  if (v.is_gguf()) {
    drop_gguf_nextn_layers(v, c);
    read_gguf_attention(v, c);
  } else {
    read_hf_attention(v, c);
  }
  read_deepseek_routing(v, c);
  if (!v.is_gguf()) {
    // transformers' Glm4MoeConfig defaults where DeepSeek's differ.
    c.norm_topk_prob = v.opt_bool(nullptr, "norm_topk_prob").value_or(true);
    if (v.hf_value("first_k_dense_replace") == nullptr && c.n_layer > 0) c.layer_moe[0] = 0;
  }
}

}  // namespace ts
