#include "model/synth_shapes.h"

#include "core/error.h"

namespace ts {
namespace {

// What every Qwen3-Next / Qwen3.5 / Qwen3.6 text model shares (config.json: head_dim 256,
// partial_rotary_factor 0.25, full_attention_interval 4, linear_num_key_heads 16,
// linear_key_head_dim = linear_value_head_dim = 128, linear_conv_kernel_dim 4, rope_theta 1e7,
// rms_norm_eps 1e-6, max_position_embeddings 262144, tie_word_embeddings false).
void qwen_hybrid(SynthShape& s) {
  s.head_dim = 256, s.rotary_dim = 64, s.full_attention_interval = 4;
  s.dn_k_heads = 16, s.dn_k_dim = 128, s.dn_v_dim = 128, s.dn_conv = 4;
  s.rope_theta = 10000000, s.rms_eps = 1e-6, s.ctx = 262144;
}

// Qwen3.5 / 3.6: the 248k vocabulary and mrope_section [11, 11, 10].
void qwen35(SynthShape& s) {
  qwen_hybrid(s);
  s.vocab = 248320;
  s.mrope_sections[0] = 11, s.mrope_sections[1] = 11, s.mrope_sections[2] = 10;
}

// One small shape per hybrid architecture, for tests: 4 layers (DeltaNet, and gated attention
// every second layer in tiny-next, whose converter writes no per-layer list, else every fourth),
// partial rotary 16 of 64 as in the fixtures, rows multiples of 256 for the k-quants, and the real
// models' 16 key / 32 value DeltaNet heads (of 16 dims): the engine takes Qwen3-Next's fused
// beta/alpha projection apart in runs of 32 rows, whole panels of the CPU backend's packed layout.
SynthShape tiny_hybrid(const char* name, const char* arch, int64_t interval) {
  SynthShape s{name, arch, "test shape (hybrid)"};
  s.vocab = 512, s.hidden = 256, s.layers = 4, s.heads = 4, s.kv_heads = 2, s.head_dim = 64;
  s.rotary_dim = 16, s.full_attention_interval = interval;
  s.dn_k_heads = 16, s.dn_v_heads = 32, s.dn_k_dim = 16, s.dn_v_dim = 16, s.dn_conv = 4;
  s.rope_theta = 10000000, s.rms_eps = 1e-6, s.ctx = 4096;
  s.mrope_sections[0] = 3, s.mrope_sections[1] = 3, s.mrope_sections[2] = 2;
  return s;
}

std::vector<SynthShape> hybrid_shapes() {
  std::vector<SynthShape> v;
  SynthShape tiny_next = tiny_hybrid("tiny-next", "qwen3next", 2);
  tiny_next.ffn = 512, tiny_next.experts = 8, tiny_next.experts_used = 2;
  tiny_next.expert_ffn = 256, tiny_next.shared_ffn = 256;
  v.push_back(tiny_next);
  SynthShape tiny_dense = tiny_hybrid("tiny-hybrid", "qwen35", 4);
  tiny_dense.ffn = 512;
  v.push_back(tiny_dense);
  SynthShape tiny_moe = tiny_hybrid("tiny-hybrid-moe", "qwen35moe", 4);
  tiny_moe.experts = 8, tiny_moe.experts_used = 2, tiny_moe.expert_ffn = 256;
  tiny_moe.shared_ffn = 256;
  v.push_back(tiny_moe);

  SynthShape next{"qwen3-next-80b-a3b", "qwen3next", "Qwen3-Next-80B-A3B"};
  qwen_hybrid(next);
  next.vocab = 151936, next.hidden = 2048, next.layers = 48, next.heads = 16, next.kv_heads = 2;
  next.ffn = 5120, next.experts = 512, next.experts_used = 10, next.expert_ffn = 512;
  next.shared_ffn = 512, next.dn_v_heads = 32;
  v.push_back(next);

  // Qwen3.6-35B-A3B has Qwen3.5-35B-A3B's text model.
  SynthShape a3b{"qwen3.6-35b-a3b", "qwen35moe", "Qwen3.5-35B-A3B / Qwen3.6-35B-A3B"};
  qwen35(a3b);
  a3b.hidden = 2048, a3b.layers = 40, a3b.heads = 16, a3b.kv_heads = 2, a3b.experts = 256;
  a3b.experts_used = 8, a3b.expert_ffn = 512, a3b.shared_ffn = 512, a3b.dn_v_heads = 32;
  v.push_back(a3b);

  // Uncertain: recalled from the model card's table (hidden 4096, 32 q / 2 kv heads, 64 value /
  // 16 key DeltaNet heads, 512 experts of 1024, 10 routed + 1 shared), not read from its
  // config.json. Checks: llama.cpp's model-type table gives 60 layers to 397B-A17B, and the sum,
  // 396.3 B, is the card's 397 B less the vision tower and MTP layer.
  SynthShape big{"qwen3.5-397b-a17b", "qwen35moe", "Qwen3.5-397B-A17B"};
  qwen35(big);
  big.hidden = 4096, big.layers = 60, big.heads = 32, big.kv_heads = 2, big.experts = 512;
  big.experts_used = 10, big.expert_ffn = 1024, big.shared_ffn = 1024, big.dn_v_heads = 64;
  v.push_back(big);

  // Uncertain as well, from the card's table (hidden 5120, 24 q / 4 kv heads, 48 value / 16 key
  // DeltaNet heads, FFN 17408); llama.cpp's table gives 27B 64 layers, and the sum is 26.9 B
  // without the vision tower.
  SynthShape dense{"qwen3.5-27b", "qwen35", "Qwen3.5-27B"};
  qwen35(dense);
  dense.hidden = 5120, dense.layers = 64, dense.heads = 24, dense.kv_heads = 4, dense.ffn = 17408;
  dense.dn_v_heads = 48;
  v.push_back(dense);
  return v;
}

}  // namespace

const std::vector<SynthShape>& synth_shapes() {
  // From each model's published config.json (hidden_size, num_hidden_layers, num_attention_heads,
  // num_key_value_heads, head_dim, intermediate_size, moe_intermediate_size, num_local_experts /
  // num_experts, num_experts_per_tok, vocab_size, rope_theta, rms_norm_eps,
  // max_position_embeddings, tie_word_embeddings, rope_scaling).
  static const std::vector<SynthShape> shapes = [] {
    std::vector<SynthShape> v;
    // Test shapes: k-quant rows need multiples of 256; `tiny` covers the tied head and llama3
    // rope scaling, `tiny-moe` the routed experts and per-head q/k norms.
    SynthShape tiny{"tiny", "llama", "test shape (dense)"};
    tiny.vocab = 512, tiny.hidden = 256, tiny.layers = 2, tiny.heads = 4, tiny.kv_heads = 2;
    tiny.head_dim = 64, tiny.ffn = 512, tiny.rope_theta = 500000, tiny.rms_eps = 1e-5;
    tiny.ctx = 4096, tiny.tied = true;
    tiny.rope_factor = 8, tiny.rope_low_freq = 1, tiny.rope_high_freq = 4,
    tiny.rope_orig_ctx = 1024;
    v.push_back(tiny);

    SynthShape tiny_moe{"tiny-moe", "qwen3moe", "test shape (MoE)"};
    tiny_moe.vocab = 512, tiny_moe.hidden = 256, tiny_moe.layers = 2, tiny_moe.heads = 4;
    tiny_moe.kv_heads = 2, tiny_moe.head_dim = 64, tiny_moe.ffn = 512, tiny_moe.experts = 8;
    tiny_moe.experts_used = 2, tiny_moe.expert_ffn = 256, tiny_moe.rope_theta = 1000000;
    tiny_moe.rms_eps = 1e-6, tiny_moe.ctx = 4096;
    v.push_back(tiny_moe);

    // `tiny-deepseek` covers MLA and group-limited routing, every width a whole k-quant block.
    SynthShape tiny_ds{"tiny-deepseek", "deepseek2", "test shape (MLA, grouped experts)"};
    tiny_ds.vocab = 512, tiny_ds.hidden = 256, tiny_ds.layers = 2, tiny_ds.heads = 2;
    tiny_ds.kv_heads = 1, tiny_ds.head_dim = 256 + 64, tiny_ds.ffn = 512, tiny_ds.experts = 8;
    tiny_ds.experts_used = 2, tiny_ds.expert_ffn = 256, tiny_ds.rope_theta = 10000;
    tiny_ds.rms_eps = 1e-6, tiny_ds.ctx = 4096, tiny_ds.q_lora = 256, tiny_ds.kv_lora = 256;
    tiny_ds.qk_rope = 64, tiny_ds.v_dim = 256, tiny_ds.expert_groups = 4;
    tiny_ds.expert_groups_used = 2, tiny_ds.shared_experts = 1, tiny_ds.dense_layers = 1;
    tiny_ds.routed_scale = 2.5, tiny_ds.yarn_factor = 40, tiny_ds.yarn_orig_ctx = 4096;
    v.push_back(tiny_ds);

    // `tiny-glm` covers GLM-4.5's attention (biases, half of each head rotated) beside
    // DeepSeek's routing.
    SynthShape tiny_glm{"tiny-glm", "glm4moe", "test shape (GLM-4.5)"};
    tiny_glm.vocab = 512, tiny_glm.hidden = 256, tiny_glm.layers = 2, tiny_glm.heads = 4;
    tiny_glm.kv_heads = 2, tiny_glm.head_dim = 64, tiny_glm.rotary_dim = 32, tiny_glm.ffn = 512;
    tiny_glm.experts = 8, tiny_glm.experts_used = 2, tiny_glm.expert_ffn = 256;
    tiny_glm.rope_theta = 1000000, tiny_glm.rms_eps = 1e-5, tiny_glm.ctx = 4096;
    tiny_glm.expert_groups = 2, tiny_glm.expert_groups_used = 1, tiny_glm.shared_experts = 1;
    tiny_glm.dense_layers = 1, tiny_glm.routed_scale = 2.5;
    v.push_back(tiny_glm);

    // `tiny-gpt-oss` covers sinks, biases, alternating sliding / full layers and YaRN.
    SynthShape tiny_go{"tiny-gpt-oss", "gpt-oss", "test shape (sinks, biases, sliding window)"};
    tiny_go.vocab = 512, tiny_go.hidden = 256, tiny_go.layers = 2, tiny_go.heads = 4;
    tiny_go.kv_heads = 2, tiny_go.head_dim = 64, tiny_go.ffn = 256, tiny_go.experts = 8;
    tiny_go.experts_used = 2, tiny_go.expert_ffn = 256, tiny_go.rope_theta = 150000;
    tiny_go.rms_eps = 1e-5, tiny_go.ctx = 4096, tiny_go.sliding_window = 8;
    tiny_go.yarn_factor = 32, tiny_go.yarn_orig_ctx = 4096;
    v.push_back(tiny_go);

    SynthShape l1b{"llama3.2-1b", "llama", "Llama-3.2-1B"};
    l1b.vocab = 128256, l1b.hidden = 2048, l1b.layers = 16, l1b.heads = 32, l1b.kv_heads = 8;
    l1b.head_dim = 64, l1b.ffn = 8192, l1b.rope_theta = 500000, l1b.rms_eps = 1e-5;
    l1b.ctx = 131072, l1b.tied = true;
    l1b.rope_factor = 32, l1b.rope_low_freq = 1, l1b.rope_high_freq = 4, l1b.rope_orig_ctx = 8192;
    v.push_back(l1b);

    SynthShape l8b{"llama3-8b", "llama", "Meta-Llama-3-8B"};
    l8b.vocab = 128256, l8b.hidden = 4096, l8b.layers = 32, l8b.heads = 32, l8b.kv_heads = 8;
    l8b.head_dim = 128, l8b.ffn = 14336, l8b.rope_theta = 500000, l8b.rms_eps = 1e-5;
    l8b.ctx = 8192;
    v.push_back(l8b);

    SynthShape q8b{"qwen3-8b", "qwen3", "Qwen3-8B"};
    q8b.vocab = 151936, q8b.hidden = 4096, q8b.layers = 36, q8b.heads = 32, q8b.kv_heads = 8;
    q8b.head_dim = 128, q8b.ffn = 12288, q8b.rope_theta = 1000000, q8b.rms_eps = 1e-6;
    q8b.ctx = 40960;
    v.push_back(q8b);

    SynthShape mix{"mixtral-8x7b", "llama", "Mixtral-8x7B-v0.1"};
    mix.vocab = 32000, mix.hidden = 4096, mix.layers = 32, mix.heads = 32, mix.kv_heads = 8;
    mix.head_dim = 128, mix.ffn = 14336, mix.experts = 8, mix.experts_used = 2;
    mix.expert_ffn = 14336, mix.rope_theta = 1000000, mix.rms_eps = 1e-5, mix.ctx = 32768;
    v.push_back(mix);

    SynthShape q30{"qwen3-30b-a3b", "qwen3moe", "Qwen3-30B-A3B"};
    q30.vocab = 151936, q30.hidden = 2048, q30.layers = 48, q30.heads = 32, q30.kv_heads = 4;
    q30.head_dim = 128, q30.ffn = 6144, q30.experts = 128, q30.experts_used = 8;
    q30.expert_ffn = 768, q30.rope_theta = 1000000, q30.rms_eps = 1e-6, q30.ctx = 40960;
    v.push_back(q30);
    for (const SynthShape& h : hybrid_shapes()) v.push_back(h);

    // qk_nope 128 + qk_rope 64; n_routed_experts, n_group, topk_group, n_shared_experts,
    // first_k_dense_replace, routed_scaling_factor and rope_scaling from its config.json. The
    // multi-token-prediction layer is not part of the shape.
    SynthShape ds3{"deepseek-v3", "deepseek2", "DeepSeek-V3"};
    ds3.vocab = 129280, ds3.hidden = 7168, ds3.layers = 61, ds3.heads = 128, ds3.kv_heads = 1;
    ds3.head_dim = 128 + 64, ds3.ffn = 18432, ds3.experts = 256, ds3.experts_used = 8;
    ds3.expert_ffn = 2048, ds3.rope_theta = 10000, ds3.rms_eps = 1e-6, ds3.ctx = 163840;
    ds3.q_lora = 1536, ds3.kv_lora = 512, ds3.qk_rope = 64, ds3.v_dim = 128;
    ds3.expert_groups = 8, ds3.expert_groups_used = 4, ds3.shared_experts = 1;
    ds3.dense_layers = 3, ds3.routed_scale = 2.5, ds3.yarn_factor = 40, ds3.yarn_orig_ctx = 4096;
    v.push_back(ds3);

    // Kimi K2 (moonshotai/Kimi-K2-Instruct's config.json): DeepSeek-V3's layers with 64 heads,
    // 384 experts in one group, one dense layer, routed_scaling_factor 2.827, YaRN factor 32 over
    // 4096 (its beta_fast / beta_slow of 1 are not written: they change no cost).
    SynthShape k2{"kimi-k2", "deepseek2", "Kimi K2"};
    k2.vocab = 163840, k2.hidden = 7168, k2.layers = 61, k2.heads = 64, k2.kv_heads = 1;
    k2.head_dim = 128 + 64, k2.ffn = 18432, k2.experts = 384, k2.experts_used = 8;
    k2.expert_ffn = 2048, k2.rope_theta = 50000, k2.rms_eps = 1e-6, k2.ctx = 131072;
    k2.q_lora = 1536, k2.kv_lora = 512, k2.qk_rope = 64, k2.v_dim = 128;
    k2.expert_groups = 1, k2.expert_groups_used = 1, k2.shared_experts = 1;
    k2.dense_layers = 1, k2.routed_scale = 2.827, k2.yarn_factor = 32, k2.yarn_orig_ctx = 4096;
    v.push_back(k2);

    // GLM-4.5-Air (zai-org/GLM-4.5-Air's config.json): GQA 96 q / 8 kv heads of 128 with q/k/v
    // biases and half of each head rotated, 128 experts top-8 beside one shared, one dense layer.
    // The multi-token-prediction layer is not part of the shape.
    SynthShape air{"glm-4.5-air", "glm4moe", "GLM-4.5-Air"};
    air.vocab = 151552, air.hidden = 4096, air.layers = 46, air.heads = 96, air.kv_heads = 8;
    air.head_dim = 128, air.rotary_dim = 64, air.ffn = 10944, air.experts = 128;
    air.experts_used = 8, air.expert_ffn = 1408, air.rope_theta = 1000000, air.rms_eps = 1e-5;
    air.ctx = 131072, air.expert_groups = 1, air.expert_groups_used = 1, air.shared_experts = 1;
    air.dense_layers = 1, air.routed_scale = 1.0;
    v.push_back(air);

    // Gemma 4: a test shape (every width a whole k-quant block; layers 4 and 5 read layer 2's
    // KV rows) and E4B (42 layers, hidden 2560, FFN 10240, 8 q / 2 kv heads of 256, global
    // layers' 512 with a quarter of their pairs rotated, every sixth layer global, window 512,
    // the last 18 layers sharing KV, per-layer embeddings of 256, soft-cap 30: as Google's
    // config.json gives them, per NVIDIA's Megatron-Bridge recipe and gemma.cpp's configs).
    SynthShape tiny_g4{"tiny-gemma4", "gemma4", "test shape (Gemma 4)"};
    tiny_g4.vocab = 512, tiny_g4.hidden = 256, tiny_g4.layers = 6, tiny_g4.heads = 4;
    tiny_g4.kv_heads = 2, tiny_g4.head_dim = 64, tiny_g4.head_dim_global = 128;
    tiny_g4.ffn = 512, tiny_g4.rope_theta = 1000000, tiny_g4.rope_theta_swa = 10000;
    tiny_g4.partial_global = 0.25, tiny_g4.swa_period = 4, tiny_g4.sliding_window = 8;
    tiny_g4.kv_shared = 2, tiny_g4.ple_dim = 256, tiny_g4.final_softcap = 30;
    tiny_g4.rms_eps = 1e-6, tiny_g4.ctx = 4096, tiny_g4.tied = true;
    v.push_back(tiny_g4);

    SynthShape e4b{"gemma4-e4b", "gemma4", "Gemma 4 E4B"};
    e4b.vocab = 262144, e4b.hidden = 2560, e4b.layers = 42, e4b.heads = 8, e4b.kv_heads = 2;
    e4b.head_dim = 256, e4b.head_dim_global = 512, e4b.ffn = 10240;
    e4b.rope_theta = 1000000, e4b.rope_theta_swa = 10000, e4b.partial_global = 0.25;
    e4b.swa_period = 6, e4b.sliding_window = 512, e4b.kv_shared = 18, e4b.ple_dim = 256;
    e4b.final_softcap = 30, e4b.rms_eps = 1e-6, e4b.ctx = 131072, e4b.tied = true;
    v.push_back(e4b);

    // The MoE layer for tests: a dense FFN beside 8 experts (top 2), k = v on the global layer 5.
    SynthShape tiny_g4m{"tiny-gemma4-moe", "gemma4", "test shape (Gemma 4 MoE)"};
    tiny_g4m.vocab = 512, tiny_g4m.hidden = 256, tiny_g4m.layers = 6, tiny_g4m.heads = 4;
    tiny_g4m.kv_heads = 2, tiny_g4m.kv_heads_global = 1, tiny_g4m.head_dim = 64;
    tiny_g4m.head_dim_global = 128, tiny_g4m.k_eq_v = true, tiny_g4m.ffn = 256;
    tiny_g4m.experts = 8, tiny_g4m.experts_used = 2, tiny_g4m.expert_ffn = 256;
    tiny_g4m.rope_theta = 1000000, tiny_g4m.rope_theta_swa = 10000, tiny_g4m.partial_global = 0.25;
    tiny_g4m.swa_period = 6, tiny_g4m.sliding_window = 8, tiny_g4m.final_softcap = 30;
    tiny_g4m.rms_eps = 1e-6, tiny_g4m.ctx = 4096, tiny_g4m.tied = true;
    v.push_back(tiny_g4m);

    // Gemma 4 26B-A4B. Uncertain: no config.json was at hand. From NVIDIA's Megatron-Bridge
    // provider (128 experts, top 8, a dense MLP beside them; sliding layers 8 kv heads of 256,
    // global 2 of 512, k = v there), llama.cpp's model-type table (30 layers) and model cards
    // (window 1024, hidden 2816, dense FFN 2112, experts of 704): the sum is the card's 25.2 B
    // total and 3.8 B active.
    SynthShape a4b{"gemma4-26b-a4b", "gemma4", "Gemma 4 26B-A4B"};
    a4b.vocab = 262144, a4b.hidden = 2816, a4b.layers = 30, a4b.heads = 16, a4b.kv_heads = 8;
    a4b.kv_heads_global = 2, a4b.head_dim = 256, a4b.head_dim_global = 512, a4b.k_eq_v = true;
    a4b.ffn = 2112, a4b.experts = 128, a4b.experts_used = 8, a4b.expert_ffn = 704;
    a4b.rope_theta = 1000000, a4b.rope_theta_swa = 10000, a4b.partial_global = 0.25;
    a4b.swa_period = 6, a4b.sliding_window = 1024, a4b.final_softcap = 30;
    a4b.rms_eps = 1e-6, a4b.ctx = 262144, a4b.tied = true;
    v.push_back(a4b);

    // Gemma 4 31B. Uncertain as well: llama.cpp's model-type table (60 layers) and model cards
    // (hidden 5376, 32 q heads, sliding 16 kv heads of 256, global 4 of 512 with k = v, FFN 21504,
    // window 1024); the sum is the card's 30.7 B.
    SynthShape g31{"gemma4-31b", "gemma4", "Gemma 4 31B"};
    g31.vocab = 262144, g31.hidden = 5376, g31.layers = 60, g31.heads = 32, g31.kv_heads = 16;
    g31.kv_heads_global = 4, g31.head_dim = 256, g31.head_dim_global = 512, g31.k_eq_v = true;
    g31.ffn = 21504, g31.rope_theta = 1000000, g31.rope_theta_swa = 10000;
    g31.partial_global = 0.25, g31.swa_period = 6, g31.sliding_window = 1024;
    g31.final_softcap = 30, g31.rms_eps = 1e-6, g31.ctx = 262144, g31.tied = true;
    v.push_back(g31);
    SynthShape go20{"gpt-oss-20b", "gpt-oss", "gpt-oss-20b"};
    go20.vocab = 201088, go20.hidden = 2880, go20.layers = 24, go20.heads = 64, go20.kv_heads = 8;
    go20.head_dim = 64, go20.ffn = 2880, go20.experts = 32, go20.experts_used = 4;
    go20.expert_ffn = 2880, go20.rope_theta = 150000, go20.rms_eps = 1e-5, go20.ctx = 131072;
    go20.sliding_window = 128, go20.yarn_factor = 32, go20.yarn_orig_ctx = 4096;
    v.push_back(go20);

    SynthShape go120 = go20;
    go120.name = "gpt-oss-120b", go120.model = "gpt-oss-120b";
    go120.layers = 36, go120.experts = 128;
    v.push_back(go120);
    return v;
  }();
  return shapes;
}

std::string synth_shape_names() {
  std::string s;
  for (const SynthShape& shape : synth_shapes())
    s += (s.empty() ? "" : ", ") + std::string(shape.name);
  return s;
}

const SynthShape& find_synth_shape(const std::string& name) {
  for (const SynthShape& shape : synth_shapes())
    if (name == shape.name) return shape;
  fail(ErrorKind::Usage,
       "--shape: unknown shape '" + name + "' (known: " + synth_shape_names() + ")");
}

}  // namespace ts
