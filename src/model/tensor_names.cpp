#include "model/tensor_names.h"

#include "core/error.h"

namespace ts {

const char* role_name(LayerTensor t) {
  switch (t) {
    case LayerTensor::AttnNorm:
      return "attn_norm";
    case LayerTensor::Wq:
      return "attn_q";
    case LayerTensor::Wk:
      return "attn_k";
    case LayerTensor::Wv:
      return "attn_v";
    case LayerTensor::Wo:
      return "attn_output";
    case LayerTensor::Bq:
      return "attn_q.bias";
    case LayerTensor::Bk:
      return "attn_k.bias";
    case LayerTensor::Bv:
      return "attn_v.bias";
    case LayerTensor::QNorm:
      return "attn_q_norm";
    case LayerTensor::KNorm:
      return "attn_k_norm";
    case LayerTensor::AttnPostNorm:
      return "post_attention_norm";
    case LayerTensor::FfnNorm:
      return "ffn_norm";
    case LayerTensor::FfnPostNorm:
      return "post_ffw_norm";
    case LayerTensor::FfnGate:
      return "ffn_gate";
    case LayerTensor::FfnUp:
      return "ffn_up";
    case LayerTensor::FfnDown:
      return "ffn_down";
    case LayerTensor::Router:
      return "ffn_gate_inp";
    case LayerTensor::RouterBias:
      return "exp_probs_b";
    case LayerTensor::ExpGate:
      return "ffn_gate_exps";
    case LayerTensor::ExpUp:
      return "ffn_up_exps";
    case LayerTensor::ExpDown:
      return "ffn_down_exps";
    case LayerTensor::ShexpGate:
      return "ffn_gate_shexp";
    case LayerTensor::ShexpUp:
      return "ffn_up_shexp";
    case LayerTensor::ShexpDown:
      return "ffn_down_shexp";
    case LayerTensor::ShexpGateInp:
      return "ffn_gate_inp_shexp";
    case LayerTensor::DnQkv:
      return "attn_qkv";
    case LayerTensor::DnZ:
      return "attn_gate";
    case LayerTensor::DnBeta:
      return "ssm_beta";
    case LayerTensor::DnAlpha:
      return "ssm_alpha";
    case LayerTensor::DnConv:
      return "ssm_conv1d";
    case LayerTensor::DnA:
      return "ssm_a";
    case LayerTensor::DnDtBias:
      return "ssm_dt.bias";
    case LayerTensor::DnNorm:
      return "ssm_norm";
    case LayerTensor::DnOut:
      return "ssm_out";
    case LayerTensor::MlaQa:
      return "attn_q_a";
    case LayerTensor::MlaQaNorm:
      return "attn_q_a_norm";
    case LayerTensor::MlaQb:
      return "attn_q_b";
    case LayerTensor::MlaKvA:
      return "attn_kv_a_mqa";
    case LayerTensor::MlaKvNorm:
      return "attn_kv_a_norm";
    case LayerTensor::MlaKb:
      return "attn_k_b";
    case LayerTensor::MlaVb:
      return "attn_v_b";
    case LayerTensor::Bo:
      return "attn_output.bias";
    case LayerTensor::AttnSinks:
      return "attn_sinks";
    case LayerTensor::RouterLogitBias:
      return "ffn_gate_inp.bias";
    case LayerTensor::ExpGateBias:
      return "ffn_gate_exps.bias";
    case LayerTensor::ExpUpBias:
      return "ffn_up_exps.bias";
    case LayerTensor::ExpDownBias:
      return "ffn_down_exps.bias";
    case LayerTensor::PleGate:
      return "inp_gate";
    case LayerTensor::PleProj:
      return "proj";
    case LayerTensor::PleNorm:
      return "post_norm";
    case LayerTensor::OutScale:
      return "layer_output_scale";
    case LayerTensor::FfnPostNorm1:
      return "post_ffw_norm_1";
    case LayerTensor::FfnPreNorm2:
      return "pre_ffw_norm_2";
    case LayerTensor::FfnPostNorm2:
      return "post_ffw_norm_2";
    case LayerTensor::RouterScale:
      return "ffn_gate_inp.scale";
    case LayerTensor::ExpScale:
      return "ffn_down_exps.scale";
    case LayerTensor::ExpGateUp:
      return "ffn_gate_up_exps";
  }
  return "?";
}

std::string gguf_name(GlobalTensor t) {
  switch (t) {
    case GlobalTensor::TokenEmbd:
      return "token_embd.weight";
    case GlobalTensor::OutputNorm:
      return "output_norm.weight";
    case GlobalTensor::Output:
      return "output.weight";
    case GlobalTensor::RopeFreqs:
      return "rope_freqs.weight";
    case GlobalTensor::PerLayerEmbd:
      return "per_layer_token_embd.weight";
    case GlobalTensor::PerLayerModelProj:
      return "per_layer_model_proj.weight";
    case GlobalTensor::PerLayerProjNorm:
      return "per_layer_proj_norm.weight";
  }
  return "";
}

std::string gguf_name(LayerTensor t, int64_t layer) {
  const std::string prefix = "blk." + std::to_string(layer) + ".";
  switch (t) {
    case LayerTensor::Bq:
      return prefix + "attn_q.bias";
    case LayerTensor::Bk:
      return prefix + "attn_k.bias";
    case LayerTensor::Bv:
      return prefix + "attn_v.bias";
    case LayerTensor::RouterBias:
      return prefix + "exp_probs_b.bias";
    case LayerTensor::DnA:
    case LayerTensor::DnDtBias:
    case LayerTensor::Bo:
    case LayerTensor::RouterLogitBias:
    case LayerTensor::ExpGateBias:
    case LayerTensor::ExpUpBias:
    case LayerTensor::ExpDownBias:
    case LayerTensor::RouterScale:
    case LayerTensor::ExpScale:
      return prefix + role_name(t);
    default:
      return prefix + role_name(t) + ".weight";
  }
}

std::string gguf_name(Family f, LayerTensor t, int64_t layer) {
  const bool hybrid = f == Family::Qwen3Next || f == Family::Qwen35 || f == Family::Qwen35Moe;
  const std::string prefix = "blk." + std::to_string(layer) + ".";
  if ((hybrid || f == Family::GptOss || f == Family::Glm4Moe) && t == LayerTensor::FfnNorm)
    return prefix + "post_attention_norm.weight";
  if (f == Family::Qwen3Next && t == LayerTensor::DnBeta) return prefix + "ssm_ba.weight";
  return gguf_name(t, layer);
}

namespace {

// gpt-oss's checkpoints hold each layer's experts as whole tensors: gate_up_proj (gate and up
// interleaved by column, even = gate) and down_proj, f32 [E][in][out] or MXFP4 `_blocks` +
// `_scales` [E][out][in / 32] (model_spec.cpp reads both); "" for the roles named as in llama.
std::string hf_name_gpt_oss(LayerTensor t, const std::string& p) {
  switch (t) {
    case LayerTensor::Bo:
      return p + "self_attn.o_proj.bias";
    case LayerTensor::AttnSinks:
      return p + "self_attn.sinks";
    case LayerTensor::Router:
      return p + "mlp.router.weight";
    case LayerTensor::RouterLogitBias:
      return p + "mlp.router.bias";
    case LayerTensor::ExpGate:
    case LayerTensor::ExpUp:
      return p + "mlp.experts.gate_up_proj";
    case LayerTensor::ExpDown:
      return p + "mlp.experts.down_proj";
    case LayerTensor::ExpGateBias:
    case LayerTensor::ExpUpBias:
      return p + "mlp.experts.gate_up_proj_bias";
    case LayerTensor::ExpDownBias:
      return p + "mlp.experts.down_proj_bias";
    default:
      return "";
  }
}

// Gemma 4's pieces beside the llama-style ones (its router and experts included); "" for the
// roles named as in Gemma 3.
std::string hf_name_gemma4(LayerTensor t, const std::string& p) {
  switch (t) {
    case LayerTensor::PleGate:
      return p + "per_layer_input_gate.weight";
    case LayerTensor::PleProj:
      return p + "per_layer_projection.weight";
    case LayerTensor::PleNorm:
      return p + "post_per_layer_input_norm.weight";
    case LayerTensor::OutScale:
      return p + "layer_scalar";
    case LayerTensor::FfnPostNorm1:
      return p + "post_feedforward_layernorm_1.weight";
    case LayerTensor::FfnPreNorm2:
      return p + "pre_feedforward_layernorm_2.weight";
    case LayerTensor::FfnPostNorm2:
      return p + "post_feedforward_layernorm_2.weight";
    case LayerTensor::Router:
      return p + "router.proj.weight";
    case LayerTensor::RouterScale:
      return p + "router.scale";
    case LayerTensor::ExpScale:
      return p + "router.per_expert_scale";
    case LayerTensor::ExpGateUp:
      return p + "experts.gate_up_proj";
    case LayerTensor::ExpDown:
      return p + "experts.down_proj";
    default:
      return "";
  }
}

}  // namespace

std::string hf_name(Family, GlobalTensor t) {
  switch (t) {
    case GlobalTensor::TokenEmbd:
      return "model.embed_tokens.weight";
    case GlobalTensor::OutputNorm:
      return "model.norm.weight";
    case GlobalTensor::Output:
      return "lm_head.weight";
    case GlobalTensor::RopeFreqs:
      return "";
    case GlobalTensor::PerLayerEmbd:
      return "model.embed_tokens_per_layer.weight";
    case GlobalTensor::PerLayerModelProj:
      return "model.per_layer_model_projection.weight";
    case GlobalTensor::PerLayerProjNorm:
      return "model.per_layer_projection_norm.weight";
  }
  return "";
}

std::string hf_name(Family f, LayerTensor t, int64_t layer, int64_t expert) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const bool gemma = f == Family::Gemma3 || f == Family::Gemma4;
  // Mixtral and MiniMax keep Mixtral's `block_sparse_moe` with w1 (gate), w3 (up), w2 (down);
  // Qwen3-MoE names its MoE block `mlp` with the dense projection names.
  const bool mixtral_moe = f == Family::Llama || f == Family::MiniMaxM2;
  const std::string moe = mixtral_moe ? p + "block_sparse_moe." : p + "mlp.";
  const std::string e = moe + "experts." + std::to_string(expert) + ".";
  // DeepSeek (and GLM after it) keeps its correction bias in the router and calls its shared
  // expert(s) plural.
  const bool deepseek = f == Family::DeepSeek2 || f == Family::Glm4Moe;
  const std::string shexp = moe + (deepseek ? "shared_experts." : "shared_expert.");
  if (f == Family::GptOss) {
    if (const std::string name = hf_name_gpt_oss(t, p); !name.empty()) return name;
  }
  if (f == Family::Gemma4) {
    if (const std::string name = hf_name_gemma4(t, p); !name.empty()) return name;
  }
  // Qwen3-VL-MoE's checkpoints hold a layer's experts as two fused tensors (model_spec.cpp).
  if (f == Family::Qwen3VLMoe && t == LayerTensor::ExpGateUp) return moe + "experts.gate_up_proj";
  if (f == Family::Qwen3VLMoe && t == LayerTensor::ExpDown) return moe + "experts.down_proj";
  switch (t) {
    case LayerTensor::AttnNorm:
      return p + "input_layernorm.weight";
    case LayerTensor::Wq:
      return p + "self_attn.q_proj.weight";
    case LayerTensor::Wk:
      return p + "self_attn.k_proj.weight";
    case LayerTensor::Wv:
      return p + "self_attn.v_proj.weight";
    case LayerTensor::Wo:
      return p + "self_attn.o_proj.weight";
    case LayerTensor::Bq:
      return p + "self_attn.q_proj.bias";
    case LayerTensor::Bk:
      return p + "self_attn.k_proj.bias";
    case LayerTensor::Bv:
      return p + "self_attn.v_proj.bias";
    case LayerTensor::QNorm:
      return p + "self_attn.q_norm.weight";
    case LayerTensor::KNorm:
      return p + "self_attn.k_norm.weight";
    // Gemma's `post_attention_layernorm` normalises the attention output (a sandwich norm); in
    // every other family that name is the pre-FFN norm.
    case LayerTensor::AttnPostNorm:
      return gemma ? p + "post_attention_layernorm.weight" : "";
    case LayerTensor::FfnNorm:
      return p + (gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
    case LayerTensor::FfnPostNorm:
      return gemma ? p + "post_feedforward_layernorm.weight" : "";
    case LayerTensor::FfnGate:
      return p + "mlp.gate_proj.weight";
    case LayerTensor::FfnUp:
      return p + "mlp.up_proj.weight";
    case LayerTensor::FfnDown:
      return p + "mlp.down_proj.weight";
    case LayerTensor::Router:
      return moe + "gate.weight";
    case LayerTensor::RouterBias:
      return moe + (deepseek ? "gate.e_score_correction_bias" : "e_score_correction_bias");
    case LayerTensor::ExpGate:
      return e + (mixtral_moe ? "w1.weight" : "gate_proj.weight");
    case LayerTensor::ExpUp:
      return e + (mixtral_moe ? "w3.weight" : "up_proj.weight");
    case LayerTensor::ExpDown:
      return e + (mixtral_moe ? "w2.weight" : "down_proj.weight");
    case LayerTensor::ShexpGate:
      return shexp + "gate_proj.weight";
    case LayerTensor::ShexpUp:
      return shexp + "up_proj.weight";
    case LayerTensor::ShexpDown:
      return shexp + "down_proj.weight";
    case LayerTensor::ShexpGateInp:
      return moe + "shared_expert_gate.weight";
    case LayerTensor::DnQkv:
      return p + (f == Family::Qwen3Next ? "linear_attn.in_proj_qkvz.weight"
                                         : "linear_attn.in_proj_qkv.weight");
    case LayerTensor::DnZ:
      return p + "linear_attn.in_proj_z.weight";
    case LayerTensor::DnBeta:
      return p + (f == Family::Qwen3Next ? "linear_attn.in_proj_ba.weight"
                                         : "linear_attn.in_proj_b.weight");
    case LayerTensor::DnAlpha:
      return p + "linear_attn.in_proj_a.weight";
    case LayerTensor::DnConv:
      return p + "linear_attn.conv1d.weight";
    case LayerTensor::DnA:
      return p + "linear_attn.A_log";
    case LayerTensor::DnDtBias:
      return p + "linear_attn.dt_bias";
    case LayerTensor::DnNorm:
      return p + "linear_attn.norm.weight";
    case LayerTensor::DnOut:
      return p + "linear_attn.out_proj.weight";
    case LayerTensor::MlaQa:
      return p + "self_attn.q_a_proj.weight";
    case LayerTensor::MlaQaNorm:
      return p + "self_attn.q_a_layernorm.weight";
    case LayerTensor::MlaQb:
      return p + "self_attn.q_b_proj.weight";
    case LayerTensor::MlaKvA:
      return p + "self_attn.kv_a_proj_with_mqa.weight";
    case LayerTensor::MlaKvNorm:
      return p + "self_attn.kv_a_layernorm.weight";
    case LayerTensor::MlaKb:
      return p + "self_attn.kv_b_proj.weight";
    case LayerTensor::MlaVb:
    default:
      return "";
  }
}

}  // namespace ts
