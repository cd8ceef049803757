// The one tensor-name map: canonical roles <-> GGUF names (llama.cpp's `blk.N.attn_q.weight`) and
// Hugging Face names (`model.layers.N.self_attn.q_proj.weight`), which differ by family for the
// MoE block and Gemma's norms.
#pragma once

#include <string>

#include "model/arch_config.h"

namespace ts {

enum class GlobalTensor {
  TokenEmbd,
  OutputNorm,
  Output,
  RopeFreqs,
  // Gemma 4's per-layer embeddings: the table, the projection of the token embedding, its norm
  PerLayerEmbd,
  PerLayerModelProj,
  PerLayerProjNorm,
};

enum class LayerTensor {
  AttnNorm,
  Wq,
  Wk,
  Wv,
  Wo,
  Bq,
  Bk,
  Bv,
  QNorm,
  KNorm,
  AttnPostNorm,
  FfnNorm,
  FfnPostNorm,
  FfnGate,
  FfnUp,
  FfnDown,
  Router,
  RouterBias,
  ExpGate,
  ExpUp,
  ExpDown,
  // A shared expert beside the routed ones, and its scalar gate
  ShexpGate,
  ShexpUp,
  ShexpDown,
  ShexpGateInp,
  // Gated DeltaNet
  DnQkv,     // q, k and v projection (Qwen3-Next HF: in_proj_qkvz, z included)
  DnZ,       // the output gate's projection
  DnBeta,    // beta (Qwen3-Next: in_proj_ba, alpha included)
  DnAlpha,   // alpha, the decay's input
  DnConv,    // depthwise causal convolution taps [channels][kernel]
  DnA,       // -exp(A_log) in GGUF, A_log in HF
  DnDtBias,  // dt_bias
  DnNorm,    // gated RMS norm weight [v_head_dim]
  DnOut,     // output projection
  // Multi-head latent attention (q and k/v LoRA paths; Wo is its output projection)
  MlaQa,      // q down-projection to q_lora_rank
  MlaQaNorm,  // RMS norm of the q latent
  MlaQb,      // q up-projection: per head qk_nope then qk_rope rows
  MlaKvA,     // kv down-projection: the latent (kv_lora_rank rows) then the shared rope key
  MlaKvNorm,  // RMS norm of the kv latent
  MlaKb,      // GGUF: per head, latent -> k_nope transposed ([kv_lora][nope]); HF: all of kv_b_proj
  MlaVb,      // GGUF: per head, latent -> v ([v][kv_lora]); HF: inside kv_b_proj
  // gpt-oss: o_proj's bias, the attention sinks (one logit per query head), the router's bias
  // and each expert's biases (GGUF: stacked [rows, n_expert]; HF: gate and up interleaved)
  Bo,
  AttnSinks,
  RouterLogitBias,
  ExpGateBias,
  ExpUpBias,
  ExpDownBias,
  // Gemma 4: the per-layer input's gate, projection and norm; the layer's output scalar; the
  // dense FFN's and the routed branch's own norms beside the experts; the router's input scale and
  // the per-expert scale of the routed weights; every expert's gate and up stacked
  PleGate,
  PleProj,
  PleNorm,
  OutScale,
  FfnPostNorm1,
  FfnPreNorm2,
  FfnPostNorm2,
  RouterScale,
  ExpScale,
  ExpGateUp,
};

const char* role_name(LayerTensor t);

std::string gguf_name(GlobalTensor t);
// For ExpGate/ExpUp/ExpDown: the stacked [cols, rows, n_expert] tensor holding every expert.
std::string gguf_name(LayerTensor t, int64_t layer);
// gguf_name() as family f's files name it (the hybrid Qwen families call the FFN norm
// post_attention_norm, Qwen3-Next stores beta and alpha as one ssm_ba).
std::string gguf_name(Family f, LayerTensor t, int64_t layer);

// "" when the family has no HF name for that role (e.g. RopeFreqs); every family names them alike.
std::string hf_name(Family f, GlobalTensor t);
// `expert` selects one expert's tensor for ExpGate/ExpUp/ExpDown (HF stores them one by one).
std::string hf_name(Family f, LayerTensor t, int64_t layer, int64_t expert = -1);

}  // namespace ts
