// Gemma4Model (Gemma3Model's keys with per-layer-type head widths, kv heads and rotary widths; no
// (1 + w) norms), its rope_freqs for the full layers' proportional rope, and its tokenizer:
// tokenizer.json as LlamaHfVocab under the model name "gemma4".
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/convert_family.h"
#include "model/tensor_names.h"

namespace ts {
namespace {

using nlohmann::json;

std::vector<bool> swa_layers(const Hparams& hp) {
  const json* types = hp.get("layer_types");
  if (types == nullptr || !types->is_array())
    fail(ErrorKind::Model, hp.where() + ": missing array 'layer_types'");
  std::vector<bool> swa;
  for (const json& t : *types) swa.push_back(t == "sliding_attention");
  return swa;
}

// `global_key` when set, else the first full-attention layer's `layer_key` in per_layer_config.
const json* full_layer_value(const Hparams& hp, const char* global_key, const char* layer_key) {
  if (const json* v = hp.get(global_key)) return v;
  const json* per_layer = hp.get("per_layer_config");
  if (per_layer == nullptr || !per_layer->is_object()) return nullptr;
  const std::vector<bool> swa = swa_layers(hp);
  for (const auto& [index, cfg] : per_layer->items()) {
    const size_t layer = std::stoul(index);
    if (layer < swa.size() && !swa[layer] && cfg.is_object() && cfg.contains(layer_key))
      return &cfg[layer_key];
  }
  return nullptr;
}

int64_t full_head_dim(const Hparams& hp) {
  const json* hd = full_layer_value(hp, "global_head_dim", "head_dim");
  if (hd == nullptr || !hd->is_number_integer())
    fail(ErrorKind::Model, hp.where() +
                               ": no head width of the full-attention layers "
                               "(global_head_dim or per_layer_config)");
  return hd->get<int64_t>();
}

}  // namespace

void gemma4_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w) {
  gemma3_keys(hp, source, w);
  const int64_t shared_kv = hp.req_int("num_kv_shared_layers");
  w.u32("attention.shared_kv_layers", shared_kv);
  const json* per_layer = hp.get("hidden_size_per_layer_input");
  w.u32("embedding_length_per_layer_input", per_layer != nullptr ? per_layer->get<int64_t>() : 0);
  const std::vector<bool> swa = swa_layers(hp);
  w.bool_array("attention.sliding_window_pattern", std::vector<int64_t>(swa.begin(), swa.end()));

  const int64_t hd_full = full_head_dim(hp), hd_swa = hp.req_int("head_dim");
  w.u32("attention.key_length", hd_full);
  w.u32("attention.value_length", hd_full);
  w.u32("attention.key_length_swa", hd_swa);
  w.u32("attention.value_length_swa", hd_swa);
  w.u32_from("expert_feed_forward_length",
             hp.find({"expert_intermediate_size", "moe_intermediate_size"}));

  const int64_t blocks = hp.req_int("num_hidden_layers");
  if (const json* wide = hp.get("use_double_wide_mlp"); wide != nullptr && *wide == true) {
    // The layers that share another's kv cache have an MLP twice as wide.
    const int64_t ff = hp.req_int("intermediate_size");
    std::vector<int64_t> widths;
    for (int64_t l = 0; l < blocks; ++l) widths.push_back(l < blocks - shared_kv ? ff : 2 * ff);
    w.i32_array("feed_forward_length", widths);
  }
  const json* kv_full = full_layer_value(hp, "num_global_key_value_heads", "num_key_value_heads");
  const json* kv_swa = hp.get("num_key_value_heads");
  if (kv_full != nullptr && kv_swa != nullptr) {
    std::vector<int64_t> heads;
    for (bool s : swa) heads.push_back(s ? kv_swa->get<int64_t>() : kv_full->get<int64_t>());
    w.i32_array("attention.head_count_kv", heads);
  }
  const json& r = hp.rope();
  const double partial_swa =
      r.contains("partial_rotary_factor") && r["partial_rotary_factor"].is_number()
          ? r["partial_rotary_factor"].get<double>()
          : 1.0;
  w.u32("rope.dimension_count", hd_full);
  w.u32("rope.dimension_count_swa",
        static_cast<int64_t>(static_cast<double>(hd_swa) * partial_swa));
}

// The full layers' proportional rope turns only the first partial_rotary_factor of each half of
// the head; the rest of the frequencies get a divisor that stops them turning.
void gemma4_rope_freqs(const Hparams& hp, std::vector<ConvertTensor>& out) {
  const json& full = hp.rope_full();
  if (full.value("rope_type", std::string()) != "proportional")
    fail(ErrorKind::Unsupported, hp.where() + ": full-attention rope_type '" +
                                     full.value("rope_type", std::string()) +
                                     "' (convert knows Gemma 4's 'proportional')");
  const json* partial =
      full.contains("partial_rotary_factor") ? &full["partial_rotary_factor"] : nullptr;
  if (partial == nullptr || !partial->is_number())
    fail(ErrorKind::Model, hp.where() + ": full_attention rope has no partial_rotary_factor");
  const int64_t hd = full_head_dim(hp);
  const auto turning = static_cast<int64_t>(static_cast<double>(hd) * partial->get<double>() / 2);
  const int64_t half = hd / 2;
  out.push_back({gguf_name(GlobalTensor::RopeFreqs),
                 {static_cast<uint64_t>(half)},
                 true,
                 [turning, half](float* v) {
                   for (int64_t i = 0; i < half; ++i) v[i] = i < turning ? 1.0f : 1e30f;
                 }});
}

void gemma4_vocab(const Hparams&, VocabRules& rules) {
  // Shown in the output so that the chat parser can read them.
  rules.llama_hf_model = "gemma4";
  rules.user_defined = {"<|channel>",       "<channel|>",       "<|tool_call>", "<tool_call|>",
                        "<|tool_response>", "<tool_response|>", "<|\"|>"};
  rules.add_bos = true;
}

}  // namespace ts
