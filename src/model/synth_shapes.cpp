#include "model/synth_shapes.h"

#include "core/error.h"

namespace ts {

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
