#include "model/family.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config_view.h"
#include "model/model_source.h"

namespace ts {
namespace {

struct FamilyEntry {
  const char* gguf_arch;
  const char* hf_class;
  Family family;
  void (*configure)(const ConfigView&, ArchConfig&);
  bool multimodal = false;  // is_multimodal_class
};

constexpr bool kMultimodal = true;

constexpr FamilyEntry kFamilies[] = {
    {"llama", "LlamaForCausalLM", Family::Llama, configure_llama},
    {"llama", "MistralForCausalLM", Family::Llama, configure_llama},
    {"llama", "MixtralForCausalLM", Family::Llama, configure_llama},
    {"qwen2", "Qwen2ForCausalLM", Family::Qwen2, configure_qwen2},
    {"qwen3", "Qwen3ForCausalLM", Family::Qwen3, configure_qwen3},
    {"qwen3moe", "Qwen3MoeForCausalLM", Family::Qwen3Moe, configure_qwen3moe},
    {"minimax-m2", "MiniMaxM2ForCausalLM", Family::MiniMaxM2, configure_minimax_m2},
    {"gemma3", "Gemma3ForCausalLM", Family::Gemma3, configure_gemma3},
    {"qwen3next", "Qwen3NextForCausalLM", Family::Qwen3Next, configure_qwen3next},
    {"qwen35", "Qwen3_5ForCausalLM", Family::Qwen35, configure_qwen35},
    {"qwen35moe", "Qwen3_5MoeForCausalLM", Family::Qwen35Moe, configure_qwen35},
    {"deepseek2", "DeepseekV3ForCausalLM", Family::DeepSeek2, configure_deepseek2},
    {"gpt-oss", "GptOssForCausalLM", Family::GptOss, configure_gpt_oss},
    {"gemma4", "Gemma4ForCausalLM", Family::Gemma4, configure_gemma4},
    {"glm4moe", "Glm4MoeForCausalLM", Family::Glm4Moe, configure_glm4moe},
    {"bert", "BertModel", Family::Bert, configure_bert},
    {"bert", "XLMRobertaModel", Family::Bert, configure_bert},
    {"nomic-bert", "NomicBertModel", Family::NomicBert, configure_nomic_bert},
    // Multimodal checkpoints, read as their text decoder (ModelSource presents it; Qwen3-VL's and
    // Gemma 3's vision towers are read by vision/, the others' vision part is not read).
    {"qwen3vl", "Qwen3VLForConditionalGeneration", Family::Qwen3VL, configure_qwen3vl, kMultimodal},
    {"qwen3vlmoe", "Qwen3VLMoeForConditionalGeneration", Family::Qwen3VLMoe, configure_qwen3vlmoe,
     kMultimodal},
    {"gemma3", "Gemma3ForConditionalGeneration", Family::Gemma3, configure_gemma3, kMultimodal},
    {"gemma4", "Gemma4ForConditionalGeneration", Family::Gemma4, configure_gemma4, kMultimodal},
    {"qwen35", "Qwen3_5ForConditionalGeneration", Family::Qwen35, configure_qwen35, kMultimodal},
    {"qwen35moe", "Qwen3_5MoeForConditionalGeneration", Family::Qwen35Moe, configure_qwen35,
     kMultimodal},
};

// Architectures we know and refuse with a reason rather than "unknown".
constexpr const char* kRefused[][2] = {
    {"Gemma3nForConditionalGeneration", "Gemma 3n is not supported"},
    {"GlmMoeDsaForCausalLM", "GLM-5's DSA (sparse) attention is not supported"},
    {"glm-dsa", "GLM-5's DSA (sparse) attention is not supported"},
    {"nomic-bert-moe", "nomic-bert-moe (nomic-embed-text-v2-moe) is not supported"},
};

}  // namespace

void read_common(const ConfigView& v, ArchConfig& c) {
  c.source = v.kind();
  c.n_layer = v.req_int("block_count", "num_hidden_layers");
  c.n_embd = v.req_int("embedding_length", "hidden_size");
  c.n_head = v.req_int("attention.head_count", "num_attention_heads");
  // Both llama.cpp and transformers default the kv heads to the query heads (no GQA).
  c.n_head_kv = v.opt_int("attention.head_count_kv", "num_key_value_heads").value_or(c.n_head);
  if (c.n_head <= 0 || c.n_head > 65536)
    v.invalid("head count", std::to_string(c.n_head) + " is out of range");
  if (c.n_embd <= 0 || c.n_embd > (1 << 20))
    v.invalid("hidden size", std::to_string(c.n_embd) + " is out of range");
  // Both formats default head_dim to hidden / heads when they do not state it.
  c.head_dim = v.opt_int("attention.key_length", "head_dim").value_or(c.n_embd / c.n_head);
  // MLA's key and value widths differ by design (its family reads them itself).
  if (v.is_gguf() && c.family != Family::DeepSeek2) {
    const auto vlen = v.opt_int("attention.value_length", nullptr);
    if (vlen && *vlen != c.head_dim)
      v.invalid("attention.value_length", std::to_string(*vlen) + " != key_length " +
                                              std::to_string(c.head_dim) +
                                              " (different k/v widths are not supported)");
  }
  c.n_ff = v.opt_int("feed_forward_length", "intermediate_size").value_or(0);
  c.ctx_train = v.opt_int("context_length", "max_position_embeddings").value_or(0);
  c.rms_eps = static_cast<float>(v.req_float("attention.layer_norm_rms_epsilon", "rms_norm_eps"));
  if (v.is_gguf()) {
    c.rope_theta = static_cast<float>(v.opt_float("rope.freq_base", nullptr).value_or(10000.0));
    read_gguf_rope_scaling(v, c);
  } else {
    auto theta = v.opt_float(nullptr, "rope_parameters/rope_theta");
    if (!theta) theta = v.opt_float(nullptr, "rope_theta");
    // Families with per-layer-type rope parameters (Gemma 3) set it themselves; validate_arch()
    // refuses a theta that is still 0.
    c.rope_theta = static_cast<float>(theta.value_or(0.0));
  }
  c.rope_theta_local = c.rope_theta;
  c.rotary_dim = c.head_dim;
  c.rope_pairing = RopePairing::NeoX;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // Checked before the per-layer vectors are sized by it (validate_arch checks the rest).
  if (c.n_layer <= 0 || c.n_layer > 4096)
    v.invalid("block count", std::to_string(c.n_layer) + " is out of range [1, 4096]");
  c.layer_sliding.assign(static_cast<size_t>(c.n_layer), 0);
  c.layer_moe.assign(c.layer_sliding.size(), 0);
  c.layer_mixer.assign(c.layer_sliding.size(), MixerKind::Attention);
  if (v.is_gguf()) {
    if (auto n = v.opt_int("vocab_size", nullptr)) c.n_vocab = *n;
  } else {
    c.n_vocab = v.req_int(nullptr, "vocab_size");
  }
  // HF defaults tie_word_embeddings per model class; the families that tie state it themselves.
  // In GGUF a tied model simply has no output.weight (resolved in model_spec.cpp).
  if (!v.is_gguf()) c.tied_embeddings = v.opt_bool(nullptr, "tie_word_embeddings").value_or(false);
}

namespace {}  // namespace

float yarn_mscale(double factor, double mscale) {
  return factor > 1 ? static_cast<float>(0.1 * mscale * std::log(factor) + 1.0) : 1.0f;
}

void read_gguf_rope_scaling(const ConfigView& v, ArchConfig& c) {
  const auto type = v.opt_string("rope.scaling.type", nullptr);
  auto factor = v.opt_float("rope.scaling.factor", nullptr);
  if (!factor) factor = v.opt_float("rope.scale_linear", nullptr);  // the older key
  // A factor without a type is linear (llama.cpp reads it so); 0 or 1 scale nothing.
  const bool scales = factor && *factor != 0.0 && *factor != 1.0;
  const std::string t = type.value_or(scales ? "linear" : "none");
  if (t == "none") return;
  // LongRoPE and other schemes change the frequencies at every position: refused rather than
  // run as plain rope.
  if (t != "linear" && t != "yarn")
    v.invalid("rope.scaling.type", "'" + t + "' is not supported (none, linear, yarn)");
  if (!factor) v.missing("rope.scaling.factor", nullptr);
  c.rope_factor = static_cast<float>(*factor);
  if (t == "linear") {
    c.rope_scaling = RopeScaling::Linear;
    return;
  }
  // YaRN as llama.cpp reads these keys: its ext_factor blends fully (1; -1 means the default,
  // 1), its attn_factor multiplies the mscale; DeepSeek's log multiplier is another formula.
  c.rope_scaling = RopeScaling::Yarn;
  c.rope_orig_ctx = v.req_int("rope.scaling.original_context_length", nullptr);
  c.rope_beta_fast =
      static_cast<float>(v.opt_float("rope.scaling.yarn_beta_fast", nullptr).value_or(32));
  c.rope_beta_slow =
      static_cast<float>(v.opt_float("rope.scaling.yarn_beta_slow", nullptr).value_or(1));
  const double ext = v.opt_float("rope.scaling.yarn_ext_factor", nullptr).value_or(-1);
  if (ext != -1 && ext != 1)
    v.invalid("rope.scaling.yarn_ext_factor", std::to_string(ext) + " is not supported (1)");
  const double attn = v.opt_float("rope.scaling.yarn_attn_factor", nullptr).value_or(1);
  // DeepSeek's YaRN (the converter writes 0.1 x mscale_all_dim as the log multiplier): the
  // rotation unscaled, the scores scaled by (1 + multiplier x ln factor)^2 instead, as llama.cpp's
  // deepseek2 does. Other architectures' readers ignore the key in llama.cpp: refused there.
  const double log_mul = v.opt_float("rope.scaling.yarn_log_multiplier", nullptr).value_or(0);
  if (log_mul != 0 && c.family != Family::DeepSeek2)
    v.invalid("rope.scaling.yarn_log_multiplier",
              "DeepSeek's YaRN scaling outside DeepSeek models "
              "is not supported");
  if (log_mul != 0) {
    if (attn != 1)
      v.invalid("rope.scaling.yarn_attn_factor",
                std::to_string(attn) + " beside a yarn_log_multiplier is not supported (1)");
    const float m = yarn_mscale(*factor, log_mul / 0.1);
    c.rope_attn_factor = 1;
    c.yarn_score_factor = m * m;
    return;
  }
  c.rope_attn_factor = static_cast<float>(attn) * yarn_mscale(*factor);
}

void read_moe_common(const ConfigView& v, ArchConfig& c, const char* hf_expert_count_key) {
  // transformers 5 names every family's expert count num_local_experts; older Qwen configs
  // say num_experts.
  c.n_expert = v.opt_int("expert_count", hf_expert_count_key)
                   .value_or(v.opt_int(nullptr, "num_local_experts").value_or(0));
  c.n_expert_used = v.opt_int("expert_used_count", "num_experts_per_tok").value_or(0);
  if (c.n_expert > 0) {
    c.layer_moe.assign(c.layer_moe.size(), 1);
    c.n_ff_expert =
        v.opt_int("expert_feed_forward_length", "moe_intermediate_size").value_or(c.n_ff);
  }
}

void read_hf_sliding_layers(const ConfigView& v, ArchConfig& c) {
  const auto n = static_cast<size_t>(c.n_layer);
  const nlohmann::json* types = v.hf_value("layer_types");
  if (types == nullptr || !types->is_array() || types->size() != n)
    v.invalid("layer_types", "expected one entry per layer (" + std::to_string(n) + ")");
  for (size_t l = 0; l < n; ++l) {
    const auto& t = (*types)[l];
    if (t != "sliding_attention" && t != "full_attention")
      v.invalid("layer_types", "entry " + std::to_string(l) +
                                   " is neither \"sliding_attention\" nor \"full_attention\"");
    c.layer_sliding[l] = t == "sliding_attention";
  }
}

void read_hf_rope_scaling(const ConfigView& v, ArchConfig& c, const char* params_path) {
  const nlohmann::json* p = v.hf_value(params_path);
  if (p == nullptr) p = v.hf_value("rope_scaling");
  if (p == nullptr || !p->is_object()) return;
  std::string type = p->value("rope_type", p->value("type", std::string("default")));
  auto num = [&](const char* key) {
    auto it = p->find(key);
    if (it == p->end() || !it->is_number())
      v.invalid(std::string(params_path) + "/" + key, "required by rope_type " + type);
    return it->get<float>();
  };
  if (type == "default") return;
  if (type == "linear") {
    c.rope_scaling = RopeScaling::Linear;
    c.rope_factor = num("factor");
  } else if (type == "llama3") {
    c.rope_scaling = RopeScaling::Llama3;
    c.rope_factor = num("factor");
    c.rope_low_freq_factor = num("low_freq_factor");
    c.rope_high_freq_factor = num("high_freq_factor");
    c.rope_orig_ctx = static_cast<int64_t>(num("original_max_position_embeddings"));
  } else if (type == "yarn") {
    c.rope_scaling = RopeScaling::Yarn;
    c.rope_factor = num("factor");
    c.rope_orig_ctx = static_cast<int64_t>(num("original_max_position_embeddings"));
    const auto opt = [&](const char* key, float fallback) {
      auto it = p->find(key);
      return it != p->end() && it->is_number() ? it->get<float>() : fallback;
    };
    // transformers treats a beta of 0 as absent too (`or`).
    const float beta_fast = opt("beta_fast", 0), beta_slow = opt("beta_slow", 0);
    c.rope_beta_fast = beta_fast != 0 ? beta_fast : 32;
    c.rope_beta_slow = beta_slow != 0 ? beta_slow : 1;
    auto truncate = p->find("truncate");
    c.rope_yarn_truncate = truncate == p->end() || !truncate->is_boolean() || truncate->get<bool>();
    // transformers: mscale and mscale_all_dim (DeepSeek), both given and non-zero, make the
    // factor on q and k their mscales' ratio (the family decides what mscale_all_dim does to the
    // scores: yarn_score_factor).
    const float mscale = opt("mscale", 0), mscale_all_dim = opt("mscale_all_dim", 0);
    auto attention = p->find("attention_factor");
    if (attention != p->end() && attention->is_number())
      c.rope_attn_factor = attention->get<float>();
    else if (mscale != 0 && mscale_all_dim != 0)
      c.rope_attn_factor =
          yarn_mscale(c.rope_factor, mscale) / yarn_mscale(c.rope_factor, mscale_all_dim);
    else
      c.rope_attn_factor = yarn_mscale(c.rope_factor);
  } else {
    v.invalid(params_path,
              "rope_type '" + type + "' is not supported (default, linear, llama3, yarn are)");
  }
}

ArchConfig read_arch_config(const ModelSource& source) {
  const std::string arch = source.architecture();
  for (const auto& r : kRefused)
    if (arch == r[0])
      fail(ErrorKind::Unsupported, source.path() + ": architecture '" + arch + "': " + r[1]);
  const bool gguf = source.kind() == SourceKind::Gguf;
  for (const FamilyEntry& f : kFamilies) {
    if (arch != (gguf ? f.gguf_arch : f.hf_class)) continue;
    const ConfigView view(source);
    ArchConfig c;
    c.family = f.family;
    f.configure(view, c);
    return c;
  }
  fail(ErrorKind::Unsupported, source.path() + ": unsupported architecture '" + arch + "'");
}

bool is_multimodal_class(std::string_view hf_class) {
  for (const FamilyEntry& f : kFamilies)
    if (f.multimodal && hf_class == f.hf_class) return true;
  return false;
}

}  // namespace ts
