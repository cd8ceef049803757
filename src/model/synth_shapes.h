// The shapes `turbospark synth` can build: the published dimensions of real models (and two tiny
// ones for tests), so that synthetic files cost per token what the real models cost.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

struct SynthShape {
  const char* name;   // as given to --shape
  const char* arch;   // GGUF general.architecture: llama, qwen3, qwen3moe, qwen3next, qwen35(moe),
                      // deepseek2, gpt-oss, glm4moe
  const char* model;  // the model whose dimensions these are
  int64_t vocab = 0;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t ffn = 0;      // dense FFN width (feed_forward_length)
  int64_t experts = 0;  // routed experts per layer (0: dense)
  int64_t experts_used = 0;
  int64_t expert_ffn = 0;  // width of one expert (Mixtral: = ffn)
  double rope_theta = 0;
  double rms_eps = 0;
  int64_t ctx = 0;
  bool tied = false;  // output head shares token_embd (no output.weight)
  // llama3 rope scaling, written as the rope_freqs tensor as llama.cpp's converter does (factor 0:
  // none).
  double rope_factor = 0;
  double rope_low_freq = 0;
  double rope_high_freq = 0;
  int64_t rope_orig_ctx = 0;
  // Hybrid stacks (qwen3next, qwen35, qwen35moe): Gated DeltaNet layers, and gated full attention
  // (q projection doubled by the output gate) in every full_attention_interval-th layer.
  int64_t full_attention_interval = 0;  // 0: every layer is attention
  int64_t rotary_dim = 0;               // rotated elements per head (0: head_dim)
  int64_t shared_ffn = 0;               // width of the shared expert beside the routed ones
  int64_t dn_k_heads = 0;
  int64_t dn_v_heads = 0;
  int64_t dn_k_dim = 0;
  int64_t dn_v_dim = 0;
  int64_t dn_conv = 0;  // causal convolution taps
  // Qwen3.5's multimodal rope sections (text, height, width), written as llama.cpp's converter
  // does for qwen35 / qwen35moe; text-only inference rotates them all as one.
  int64_t mrope_sections[3] = {0, 0, 0};

  bool hybrid() const { return full_attention_interval > 0; }
  bool delta_net_layer(int64_t l) const {
    return hybrid() && (l + 1) % full_attention_interval != 0;
  }
  // deepseek2 (DeepSeek-V3): MLA sizes (head_dim is then qk_nope + qk_rope), expert groups, shared
  // experts (each expert_ffn wide), the leading dense layers (ffn wide), the routed weights' scale
  // and DeepSeek's YaRN (factor, original context; mscale = mscale_all_dim = 1).
  int64_t q_lora = 0;
  int64_t kv_lora = 0;
  int64_t qk_rope = 0;
  int64_t v_dim = 0;
  int64_t expert_groups = 0;
  int64_t expert_groups_used = 0;
  int64_t shared_experts = 0;
  int64_t dense_layers = 0;
  double routed_scale = 0;
  double yarn_factor = 0;
  int64_t yarn_orig_ctx = 0;
  // gpt-oss: the window of its sliding layers (every other one, the first included); its YaRN
  // uses yarn_factor and yarn_orig_ctx. gemma4: the window of its sliding layers too.
  int64_t sliding_window = 0;
  // gemma4: every swa_period-th layer global (head_dim_global wide, proportional rope on
  // partial_global of its pairs, rope_theta), the others sliding (head_dim, rope_theta_swa,
  // sliding_window); the last kv_shared layers of the full depth read earlier layers' KV rows;
  // per-layer embeddings ple_dim wide; the final logits soft-capped.
  int64_t swa_period = 0;
  int64_t head_dim_global = 0;
  double partial_global = 0;
  double rope_theta_swa = 0;
  int64_t kv_shared = 0;
  int64_t ple_dim = 0;
  double final_softcap = 0;
  int64_t kv_heads_global = 0;  // the global layers' kv heads (0: kv_heads)
  bool k_eq_v = false;          // the global layers have no v projection

  bool gemma4() const { return swa_period > 0; }
  bool global_layer(int64_t l) const { return gemma4() && (l + 1) % swa_period == 0; }
  // Layers of a file cut to `n` that share KV rows: those of the full depth's that it keeps.
  int64_t kv_shared_of(int64_t n) const { return std::max<int64_t>(0, kv_shared - (layers - n)); }
};

const std::vector<SynthShape>& synth_shapes();
// The shape called `name`; fails (Usage) listing the known names.
const SynthShape& find_synth_shape(const std::string& name);
// "tiny, tiny-moe, llama3.2-1b, ..."
std::string synth_shape_names();

}  // namespace ts
