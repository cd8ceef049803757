// ArchConfig: every behavioural choice the generic transformer block makes, stated explicitly.
// Each family (model/families/) fills it from GGUF metadata or config.json by its own rules; the
// block code (runtime/) reads only this struct and never asks which family it is running.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/routing.h"

namespace ts {

enum class Family {
  Llama,
  Qwen2,
  Qwen3,
  Qwen3Moe,
  MiniMaxM2,
  Gemma3,
  Qwen3Next,
  Qwen35,
  Qwen35Moe,
  DeepSeek2,  // DeepSeek-V3 / R1 (llama.cpp's deepseek2)
  GptOss,
  Qwen3VL,     // Qwen3-VL's text decoder (M-RoPE, DeepStack); its vision tower is src/vision/
  Qwen3VLMoe,  // Qwen3-VL-MoE's (30B-A3B, 235B-A22B): Qwen3-VL's decoder with Qwen3-MoE's experts
  Gemma4,
  Glm4Moe,   // GLM-4.5 / 4.6 / 4.7 (llama.cpp's glm4moe)
  Bert,      // BERT encoders (sentence embeddings): LayerStack::Encoder
  NomicBert  // nomic-embed-text v1 / v1.5: a BERT encoder with rotary positions and SwiGLU
};
const char* family_name(Family f);

enum class SourceKind { Gguf, HfDir };

// How q/k are normalised before RoPE. Decided by the family, never by probing for tensors: a probe
// cannot tell a model without a q-norm from a file that lost one.
enum class QkNorm { None, PerHead, WholeProjection };
const char* qk_norm_name(QkNorm q);

// Which elements a rotation pairs. GGUF llama stores q/k rows permuted to Meta's interleaved
// layout (pairs 2i, 2i+1); HF checkpoints and every other GGUF arch pair i with i + rotary_dim/2.
enum class RopePairing { Adjacent, NeoX };

enum class RopeScaling { None, Linear, Llama3, Yarn };
const char* rope_scaling_name(RopeScaling r);

// SwiGluClamped: gpt-oss's SwiGLU with the gate clamped above, the up clamped both ways, a
// sharpened sigmoid and a +1 on the up (ArchConfig::swiglu_alpha, swiglu_limit).
enum class FfnActivation { SiLU, GeluTanh, SwiGluClamped };

// Where an image's rows attend to each other both ways (ArchConfig::image_attention).
enum class ImageAttention { AllLayers, SlidingLayers, None };

// A layer's token mixer: what mixes information across positions. Each owns its per-sequence state
// (KV rows for attention; a convolution window and a recurrent matrix for DeltaNet).
enum class MixerKind : uint8_t {
  Attention,  // softmax attention over the KV cache (full or sliding, optionally output-gated)
  DeltaNet,   // Gated DeltaNet: linear attention with a decaying recurrent state (Qwen3-Next)
  Mla         // multi-head latent attention (DeepSeek-V3): rows of a shared latent + rope key
};
const char* mixer_name(MixerKind m);

// The stack of layers a model is. Decoder: pre-norm layers of a token mixer and an FFN, causal,
// over a KV cache (runtime/forward.h). Encoder: BERT's post-LayerNorm layers over one whole text,
// every token attending to every other, token types added to the embeddings, positions learned
// (added to the embeddings) or rotary (EncoderConfig), no LM head: it serves embeddings only
// (runtime/encoder.h).
enum class LayerStack : uint8_t { Decoder, Encoder };

// How an encoder knows where a token is: a learned table added to the embeddings (BERT), or
// rotary q / k (nomic-bert: rope_theta, NeoX pairs over the whole head).
enum class EncoderPositions : uint8_t { Learned, Rotary };

// An encoder's FFN: down(gelu(up(x))) (BERT), or down(silu(gate(x)) * up(x)) (nomic-bert).
enum class EncoderFfn : uint8_t { Gelu, SwiGlu };

// An encoder stack's own values (LayerStack::Encoder).
struct EncoderConfig {
  int64_t n_positions = 0;  // the longest text: the learned table's rows, the trained context
  // Rows of the learned table before position 0 (XLM-R's HF checkpoints: pad_token_id + 1).
  int64_t position_offset = 0;
  float norm_eps = 0;  // the LayerNorms' epsilon
  EncoderPositions positions = EncoderPositions::Learned;
  EncoderFfn ffn = EncoderFfn::Gelu;
  bool gelu_tanh = false;  // the GELU: the tanh approximation, else the exact (erf) form
  bool biases = true;      // the projections have biases (the LayerNorms always do)
};

// Gated DeltaNet's sizes (Qwen3-Next / Qwen3.5). Queries and keys have n_k_heads heads of
// k_head_dim; values, the output and the recurrent state n_v_heads heads of v_head_dim, each value
// head reading one key head.
struct DeltaNetConfig {
  int64_t n_k_heads = 0;
  int64_t n_v_heads = 0;
  int64_t k_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t conv_kernel = 0;  // taps of the causal depthwise convolution over q, k and v
  // Which key head value head h reads: h % n_k_heads when the value heads are tiled (llama.cpp's
  // converter reorders them so), h / (n_v_heads / n_k_heads) when grouped (the HF checkpoints).
  bool v_heads_tiled = false;

  int64_t key_dim() const { return n_k_heads * k_head_dim; }
  int64_t value_dim() const { return n_v_heads * v_head_dim; }
  int64_t conv_channels() const { return 2 * key_dim() + value_dim(); }
  // f32 values one sequence holds for one layer: the convolution's last inputs and the state.
  int64_t state_floats() const {
    return (conv_kernel - 1) * conv_channels() + n_v_heads * k_head_dim * v_head_dim;
  }
};

// Multi-head latent attention's sizes (DeepSeek-V3). Queries come through a low-rank path of
// q_lora_rank (0: one projection); keys and values are one shared latent of kv_lora_rank per token,
// expanded per head into qk_nope_head_dim key and v_head_dim value elements, plus a rope part of
// qk_rope_head_dim key elements shared by every head. A sequence keeps only the latent and the
// rope part of each token.
struct MlaConfig {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // Elements of one token's cache row: its rope key then its latent.
  int64_t row_width() const { return qk_rope_head_dim + kv_lora_rank; }
};

struct ArchConfig {
  Family family = Family::Llama;
  SourceKind source = SourceKind::Gguf;
  LayerStack stack = LayerStack::Decoder;
  EncoderConfig encoder;  // LayerStack::Encoder

  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;  // of q, k and v (families with different k/v widths are refused)
  int64_t n_ff = 0;      // dense FFN width (0 when every layer is MoE)
  int64_t n_ff_expert = 0;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t ctx_train = 0;

  float rms_eps = 0;
  bool norm_plus_one = false;  // RMS norm scales by (1 + w): HF Gemma stores w, GGUF stores 1 + w
  bool sandwich_norms =
      false;                 // extra norms on the attention and FFN outputs before the residual add
  float embed_scale = 1.0f;  // Gemma multiplies embeddings by sqrt(n_embd)
  FfnActivation ffn_act = FfnActivation::SiLU;
  float swiglu_alpha = 0;  // SwiGluClamped: out = (clamp(up) + 1) * g * sigmoid(alpha * g)
  float swiglu_limit = 0;  // SwiGluClamped: g = min(gate, limit), up within [-limit, limit]

  bool qkv_bias = false;
  QkNorm qk_norm = QkNorm::None;
  float attn_scale = 0;     // multiplies q.k; 1/sqrt(head_dim) unless the family says otherwise
  float attn_softcap = 0;   // 0 = none
  float final_softcap = 0;  // 0 = none

  float rope_theta = 0;
  float rope_theta_local = 0;  // sliding-window layers (Gemma 3); equals rope_theta otherwise
  int64_t rotary_dim = 0;      // rotated elements per head (partial rotary when < head_dim)
  RopePairing rope_pairing = RopePairing::NeoX;
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_factor = 1.0f;
  float rope_low_freq_factor = 0;
  float rope_high_freq_factor = 0;
  int64_t rope_orig_ctx = 0;
  // YaRN: the rotations bounding the band of frequencies blended between kept and divided by
  // rope_factor, whether those bounds are rounded outwards (transformers' `truncate`), and the
  // factor both q and k are multiplied by after rotation (the attention's scores by its square).
  float rope_beta_fast = 32;
  float rope_beta_slow = 1;
  bool rope_yarn_truncate = true;
  float rope_attn_factor = 1;
  // DeepSeek's YaRN: the scores' scale times this (mscale(factor, mscale_all_dim)^2), q and k
  // rotated unscaled.
  float yarn_score_factor = 1;
  bool rope_freqs_tensor =
      false;  // llama3 scaling given as per-frequency divisors (GGUF rope_freqs)
  // Sliding-window layers rotate with the global frequencies, scaling included (gpt-oss has one
  // rotary for every layer); otherwise with rope_theta_local, unscaled (Gemma 3).
  bool rope_local_scaled = false;
  // M-RoPE (Qwen3-VL): each frequency pair rotates by one of a row's three positions (T, H, W),
  // mrope_sections[s] pairs for stream s. Interleaved: pair i takes stream i % 3 while
  // i < 3 * sections[i % 3], else T; contiguous: the sections one after another. Empty: one
  // position a row (ordinary rope); a text token's three positions are equal, so it is the same.
  std::vector<int64_t> mrope_sections;
  bool mrope_interleaved = false;
  // DeepStack (Qwen3-VL): the vision tower's features of this many of its layers are added to the
  // hidden states at the image rows after decoder layers 0 .. n_deepstack - 1.
  int64_t n_deepstack = 0;
  // Which attention layers let an image's rows attend to the later rows of their image
  // (RowInputs::span): every one (Gemma 3), only the sliding-window ones (Gemma 4's "vision"), or
  // none (Gemma 4's small models: causal).
  ImageAttention image_attention = ImageAttention::AllLayers;
  // The token an image row is embedded as where that embedding still counts: Gemma 4's per-layer
  // inputs take the pad token's there (transformers replaces the placeholders with it).
  int32_t image_row_token = 0;

  int64_t sliding_window = 0;          // keys a sliding layer sees, including the query itself
  std::vector<uint8_t> layer_sliding;  // per layer: 1 = sliding-window attention
  std::vector<uint8_t> layer_moe;      // per layer: 1 = routed-expert FFN
  std::vector<MixerKind> layer_mixer;  // per layer: its token mixer
  // The attention's output is multiplied by sigmoid(gate) before o_proj; the gate comes from the q
  // projection, whose rows give per head head_dim query values then head_dim gate values.
  bool attn_output_gate = false;
  bool attn_out_bias = false;  // o_proj has a bias
  // A learned logit per query head joins each softmax's denominator (and is dropped): gpt-oss's
  // attention sinks.
  bool attn_sinks = false;
  DeltaNetConfig delta;  // DeltaNet layers' sizes (when any layer is one)
  MlaConfig mla;         // MLA layers' sizes (when any layer is one)

  RouterScoring router = RouterScoring::None;
  bool norm_topk_prob = false;  // renormalise the k selected weights to sum 1
  bool router_bias = false;  // per-expert selection bias tensor (MiniMax e_score_correction_bias)
  // SigmoidGroupTopk: experts in n_group equal groups, the choice made within the best topk_group.
  int64_t n_group = 1;
  int64_t topk_group = 1;
  float routed_scale = 1.0f;       // multiplies the k weights (DeepSeek's routed_scaling_factor)
  bool router_logit_bias = false;  // the router is a linear layer with a bias (gpt-oss)
  bool expert_bias = false;        // each expert's gate, up and down projections have biases
  // A shared expert beside the routed ones in every MoE layer (a dense GLU of this width, 0: none),
  // its output scaled by sigmoid(x . shared_gate) when shared_expert_gate.
  int64_t n_ff_shared = 0;
  bool shared_expert_gate = false;

  bool tied_embeddings = false;

  // Gemma 4. Attention layers of two shapes: per layer its head_dim, kv heads and dense FFN width
  // (empty: head_dim, n_head_kv and n_ff everywhere).
  std::vector<int64_t> layer_head_dim;
  std::vector<int64_t> layer_n_head_kv;
  std::vector<int64_t> layer_n_ff;
  // Per layer, the layer whose KV rows it attends over: itself, or an earlier layer's (KV sharing;
  // such a layer projects no k and v and holds no cache of its own). Empty: every layer its own.
  std::vector<int32_t> layer_kv_source;
  // "Proportional" rope on the global layers: the first rope_partial_global of a head's pairs
  // rotate with base^(-2i / head_dim), the rest with frequency 0 (the pairs still span the head).
  float rope_partial_global = 1.0f;
  bool attn_v_norm = false;  // v RMS-normed per head, without a weight
  bool attn_k_eq_v = false;  // global layers have no v projection: v is k's projection
  // Per-layer embeddings: a second table of n_layer x n_embd_per_layer values a token, mixed
  // with a projection of the token's embedding; layer l gates its slice into its residual stream.
  int64_t n_embd_per_layer = 0;
  bool layer_output_scale = false;  // each layer's output (the whole stream) times a scalar
  // MoE layers run a dense FFN beside the routed experts, each branch with its own norms, and the
  // router reads the residual stream through its own norm and per-dimension scale; the routed
  // weights are multiplied by a per-expert scale.
  bool moe_dense_beside = false;

  bool is_moe() const { return n_expert > 0; }
  bool mrope() const { return !mrope_sections.empty(); }
  bool has_mixer(MixerKind m) const;
  int64_t attention_layers() const;  // layers that hold KV rows (MLA layers not included)

  int64_t head_dim_of(int64_t l) const {
    return layer_head_dim.empty() ? head_dim : layer_head_dim[static_cast<size_t>(l)];
  }
  int64_t n_head_kv_of(int64_t l) const {
    return layer_n_head_kv.empty() ? n_head_kv : layer_n_head_kv[static_cast<size_t>(l)];
  }
  int64_t n_ff_of(int64_t l) const {
    return layer_n_ff.empty() ? n_ff : layer_n_ff[static_cast<size_t>(l)];
  }
  int64_t kv_source_of(int64_t l) const {
    return layer_kv_source.empty() ? l : layer_kv_source[static_cast<size_t>(l)];
  }
  bool holds_kv(int64_t l) const { return kv_source_of(l) == l; }
  // Widest q (n_head x head_dim) and k/v (n_head_kv x head_dim) rows of any attention layer.
  int64_t max_q_width() const;
  int64_t max_kv_width() const;
};

}  // namespace ts
