// The model classes `convert` handles: per class, the keys it writes beside TextModel's and what
// it does to the tensors and the tokenizer, as llama.cpp's converter's class for it does.
#include <nlohmann/json.hpp>

#include "model/convert_family.h"

namespace ts {
namespace {

using nlohmann::json;

int64_t head_dim(const Hparams& hp) {
  if (const json* hd = hp.get("head_dim")) return hd->get<int64_t>();
  return hp.req_int("hidden_size") / hp.req_int("num_attention_heads");
}

// LlamaModel: the vocabulary size and the rotary width (the whole head).
void llama_keys(const Hparams& hp, const ModelSource&, KeyWriter& w) {
  w.u32("vocab_size", hp.req_int("vocab_size"));
  w.u32("rope.dimension_count", head_dim(hp));
}

// Qwen2Model and Qwen3Model: an embedding model's pooling.
void qwen2_keys(const Hparams&, const ModelSource& source, KeyWriter& w) {
  write_pooling_type(source, w);
}

// Qwen3-VL's classes: how many vision layers feed the decoder (deepstack).
void deepstack_keys(const Hparams& hp, KeyWriter& w) {
  const json* vision = hp.get("vision_config");
  const json* layers = vision != nullptr && vision->contains("deepstack_visual_indexes")
                           ? &(*vision)["deepstack_visual_indexes"]
                           : nullptr;
  w.u32("n_deepstack_layers",
        layers != nullptr && layers->is_array() ? static_cast<int64_t>(layers->size()) : 0);
}

// Qwen3VLTextModel: Qwen3's and the deepstack count.
void qwen3vl_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w) {
  qwen2_keys(hp, source, w);
  deepstack_keys(hp, w);
}

}  // namespace

// Qwen2MoeModel (Qwen3-MoE's base): the routed and shared experts' widths.
void qwen2moe_keys(const Hparams& hp, const ModelSource&, KeyWriter& w) {
  w.u32_from("expert_feed_forward_length", hp.get("moe_intermediate_size"));
  w.u32_from("expert_shared_feed_forward_length", hp.get("shared_expert_intermediate_size"));
}

namespace {

// Qwen3VLMoeTextModel: Qwen3-MoE's and the deepstack count.
void qwen3vlmoe_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w) {
  qwen2_keys(hp, source, w);
  qwen2moe_keys(hp, source, w);
  deepstack_keys(hp, w);
}

void minimax_m2_keys(const Hparams& hp, const ModelSource&, KeyWriter& w) {
  w.u32("expert_feed_forward_length", hp.req_int("intermediate_size"));
  w.u32("rope.dimension_count", hp.req_int("rotary_dim"));
}

}  // namespace

// Gemma3Model: its defaults for what a config leaves out, the final soft-cap, the window.
void gemma3_keys(const Hparams& hp, const ModelSource&, KeyWriter& w) {
  const auto num = [&](const char* key, double fallback) {
    const json* v = hp.get(key);
    return v != nullptr && v->is_number() ? v->get<double>() : fallback;
  };
  w.u32("context_length", static_cast<int64_t>(num("max_position_embeddings", 131072)));
  w.u32("attention.head_count", static_cast<int64_t>(num("num_attention_heads", 8)));
  w.f32("attention.layer_norm_rms_epsilon", num("rms_norm_eps", 1e-6));
  w.u32("attention.key_length", static_cast<int64_t>(num("head_dim", 256)));
  w.u32("attention.value_length", static_cast<int64_t>(num("head_dim", 256)));
  const json& r = hp.rope_full();
  w.f32("rope.freq_base", r.contains("rope_theta") && r["rope_theta"].is_number()
                              ? r["rope_theta"].get<double>()
                              : 1e6);
  if (const double cap = num("final_logit_softcapping", 0); cap != 0)
    w.f32("final_logit_softcapping", cap);
  const json* pattern = hp.get("sliding_window_pattern");
  if (pattern == nullptr || *pattern != 1)
    w.u32_from("attention.sliding_window", hp.get("sliding_window"));
  w.u32("attention.head_count_kv", static_cast<int64_t>(num("num_key_value_heads", 4)));
}

namespace {

// Glm4MoeModel: partial rotary, DeepSeek-style routing (sigmoid, scaled, normalised), the
// leading dense layers and the MTP layers.
void glm4moe_keys(const Hparams& hp, const ModelSource&, KeyWriter& w) {
  const json& r = hp.rope();
  const double partial =
      r.contains("partial_rotary_factor") && r["partial_rotary_factor"].is_number()
          ? r["partial_rotary_factor"].get<double>()
          : 0.5;
  w.u32("rope.dimension_count", static_cast<int64_t>(static_cast<double>(head_dim(hp)) * partial));
  w.u32_from("expert_count", hp.get("n_routed_experts"));
  w.u32_from("expert_feed_forward_length", hp.get("moe_intermediate_size"));
  w.u32_from("expert_shared_count", hp.get("n_shared_experts"));
  w.u32_from("leading_dense_block_count", hp.get("first_k_dense_replace"));
  w.u32("expert_gating_func", 2);  // sigmoid
  w.f32_from("expert_weights_scale", hp.get("routed_scaling_factor"));
  if (const json* norm = hp.get("norm_topk_prob"); norm != nullptr && norm->is_boolean())
    w.boolean("expert_weights_norm", norm->get<bool>());
  w.u32_from("nextn_predict_layers", hp.get("num_nextn_predict_layers"));
}

// GptOssModel: the sliding window and the experts' width.
void gpt_oss_keys(const Hparams& hp, const ModelSource&, KeyWriter& w) {
  w.u32("attention.sliding_window", hp.req_int("sliding_window"));
  w.u32("expert_feed_forward_length", hp.req_int("intermediate_size"));
}

constexpr uint32_t kLlamaFixes = kPermuteQK | kAddPrefixSpaceKey;
constexpr uint32_t kGemmaFixes = kNormPlusOne | kTrimEmbd | kNoSpacePrefix;

// _set_vocab_glm: "<|endoftext|>" as eot makes generation endless, so the user turn ends it.
constexpr SpecialToken kGlmSpecial[] = {{"bos", "[gMASK]"},
                                        {"eot", "<|user|>"},
                                        {"unk", "<|endoftext|>"},
                                        {"eom", "<|observation|>"},
                                        {nullptr, nullptr}};

// LlamaModel's classes: q/k permuted, llama3's rope_freqs, the llama-bpe pre-tokenizer.
constexpr ConvertFamily llama_class(const char* hf_class) {
  return {.hf_class = hf_class,
          .arch = "llama",
          .family = Family::Llama,
          .keys = llama_keys,
          .fixes = kLlamaFixes,
          .bpe_pre = "llama-bpe",
          .leading_tensors = llama3_rope_freqs};
}

// Gemma4Model's classes: Gemma 3's trimmed embeddings but no (1 + w) norms, its own tokenizer.
constexpr ConvertFamily gemma4_class(const char* hf_class) {
  return {.hf_class = hf_class,
          .arch = "gemma4",
          .family = Family::Gemma4,
          .keys = gemma4_keys,
          .fixes = kTrimEmbd | kNoSpacePrefix,
          .leading_tensors = gemma4_rope_freqs,
          .vocab_rules = gemma4_vocab};
}

// {HF class, GGUF architecture, tensor names of, keys, fixes, BPE pre-tokenizer, own tensors,
//  MTP layer count key, special tokens, leading tensors, vocabulary rules}
const ConvertFamily kConvertFamilies[] = {
    llama_class("LlamaForCausalLM"),
    llama_class("MistralForCausalLM"),
    llama_class("MixtralForCausalLM"),
    {"Qwen2ForCausalLM", "qwen2", Family::Qwen2, qwen2_keys, 0, "qwen2"},
    {"Qwen3ForCausalLM", "qwen3", Family::Qwen3, qwen2_keys, 0, "qwen2"},
    {"Qwen3MoeForCausalLM", "qwen3moe", Family::Qwen3Moe, qwen2moe_keys, 0, "qwen2"},
    {"MiniMaxM2ForCausalLM", "minimax-m2", Family::MiniMaxM2, minimax_m2_keys, 0, "minimax-m2"},
    {"Gemma3ForCausalLM", "gemma3", Family::Gemma3, gemma3_keys, kGemmaFixes, ""},
    gemma4_class("Gemma4ForCausalLM"),
    {"GptOssForCausalLM", "gpt-oss", Family::GptOss, gpt_oss_keys, 0, "gpt-4o", gpt_oss_tensor},
    {"Qwen3NextForCausalLM", "qwen3next", Family::Qwen3Next, qwen3next_keys, kNormPlusOne, "qwen2",
     qwen3next_tensor},
    {"Qwen3_5ForCausalLM", "qwen35", Family::Qwen35, qwen35_keys, kNormPlusOne, "qwen35",
     qwen35_tensor},
    {"Qwen3_5MoeForCausalLM", "qwen35moe", Family::Qwen35Moe, qwen35_keys, kNormPlusOne, "qwen35",
     qwen35_tensor},
    {"DeepseekV3ForCausalLM", "deepseek2", Family::DeepSeek2, deepseek2_keys, 0, "deepseek-v3",
     deepseek2_tensor},
    {"Glm4MoeForCausalLM", "glm4moe", Family::Glm4Moe, glm4moe_keys, 0, "glm4", nullptr,
     "num_nextn_predict_layers", kGlmSpecial},
    {.hf_class = "BertModel",
     .arch = "bert",
     .family = Family::Bert,
     .keys = bert_keys,
     .bpe_pre = "bert-bge",
     .own_tensor = bert_tensor,
     .vocab_rules = bert_vocab},
    {.hf_class = "XLMRobertaModel",
     .arch = "bert",
     .family = Family::Bert,
     .keys = xlm_roberta_keys,
     .own_tensor = xlm_roberta_tensor,
     .vocab_rules = xlm_roberta_vocab},
    {.hf_class = "NomicBertModel",
     .arch = "nomic-bert",
     .family = Family::NomicBert,
     .keys = nomic_bert_keys,
     .bpe_pre = "bert-bge",
     .own_tensor = nomic_bert_tensor,
     .vocab_rules = bert_vocab},
    // The text decoder of a multimodal checkpoint (its vision tower is the converter's --mmproj).
    {"Qwen3VLForConditionalGeneration", "qwen3vl", Family::Qwen3VL, qwen3vl_keys, 0, "qwen2"},
    {"Qwen3VLMoeForConditionalGeneration", "qwen3vlmoe", Family::Qwen3VLMoe, qwen3vlmoe_keys, 0,
     "qwen2", qwen3vlmoe_tensor},
    {"Gemma3ForConditionalGeneration", "gemma3", Family::Gemma3, gemma3_keys, kGemmaFixes, ""},
    gemma4_class("Gemma4ForConditionalGeneration"),
    {"Qwen3_5ForConditionalGeneration", "qwen35", Family::Qwen35, qwen35_keys, kNormPlusOne,
     "qwen35", qwen35_tensor},
    {"Qwen3_5MoeForConditionalGeneration", "qwen35moe", Family::Qwen35Moe, qwen35_keys,
     kNormPlusOne, "qwen35", qwen35_tensor},
};

}  // namespace

const ConvertFamily* find_convert_family(const std::string& hf_class) {
  for (const ConvertFamily& f : kConvertFamilies)
    if (hf_class == f.hf_class) return &f;
  return nullptr;
}

std::string convert_family_names() {
  std::string s;
  for (const ConvertFamily& f : kConvertFamilies)
    s += (s.empty() ? "" : ", ") + std::string(f.hf_class);
  return s;
}

}  // namespace ts
