// The configuration as llama.cpp's converter reads it and the keys its TextModel writes for every
// class (convert_family.h).
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf_writer.h"
#include "model/convert_family.h"
#include "model/model_source.h"
#include "model/pooling.h"

namespace ts {

using nlohmann::json;

Hparams::Hparams(const json& config, const std::string& where) : h_(config), where_(where) {
  if (auto text = config.find("text_config"); text != config.end() && text->is_object())
    for (const auto& [k, v] : text->items()) h_[k] = v;
  if (const json* r = find({"rope_parameters"}); r != nullptr && r->is_object())
    rope_ = *r;
  else if (const json* s = find({"rope_scaling"}); s != nullptr && s->is_object())
    rope_ = *s;
  else
    rope_ = json::object();
  // The older top-level keys mirrored into rope_parameters, unless it is split by layer type.
  if (rope_.contains("full_attention") || rope_.contains("sliding_attention")) return;
  const json* theta = find({"global_rope_theta", "rope_global_theta", "rope_theta_global",
                            "rope_theta", "rotary_emb_base"});
  const json* local = find({"local_rope_theta", "rope_local_theta", "rope_theta_local",
                            "swa_rope_theta", "rope_local_base_freq"});
  const json* partial = find({"partial_rotary_factor", "rope_pct", "rope_percent"});
  const json* orig = find({"original_max_position_embeddings"});
  if (local != nullptr) rope_["sliding_attention"] = json{{"rope_theta", *local}};
  if (!rope_.contains("rope_theta") && theta != nullptr) rope_["rope_theta"] = *theta;
  if (!rope_.contains("rope_type") && rope_.contains("type")) rope_["rope_type"] = rope_["type"];
  if (!rope_.contains("partial_rotary_factor") && partial != nullptr)
    rope_["partial_rotary_factor"] = *partial;
  if (!rope_.contains("original_max_position_embeddings") && orig != nullptr)
    rope_["original_max_position_embeddings"] = *orig;
}

const json* Hparams::find(std::initializer_list<const char*> keys) const {
  for (const char* k : keys) {
    auto it = h_.find(k);
    if (it != h_.end()) return it->is_null() ? nullptr : &*it;
  }
  return nullptr;
}

int64_t Hparams::req_int(std::initializer_list<const char*> keys) const {
  const json* v = find(keys);
  if (v == nullptr || !v->is_number_integer())
    fail(ErrorKind::Model, where_ + ": missing integer '" + *keys.begin() + "'");
  return v->get<int64_t>();
}

const json& Hparams::rope_full() const {
  auto it = rope_.find("full_attention");
  return it != rope_.end() && it->is_object() ? *it : rope_;
}

std::string KeyWriter::full(const std::string& key) const {
  if (key.starts_with("general.") || key.starts_with("tokenizer.")) return key;
  return arch_ + "." + key;
}

void KeyWriter::u32(const std::string& key, int64_t v) {
  kv_.set(full(key), gguf_int(GgufType::U32, v));
}
void KeyWriter::f32(const std::string& key, double v) {
  kv_.set(full(key), gguf_float(GgufType::F32, v));
}
void KeyWriter::boolean(const std::string& key, bool v) {
  kv_.set(full(key), gguf_int(GgufType::Bool, v ? 1 : 0));
}
void KeyWriter::str(const std::string& key, std::string v) {
  kv_.set(full(key), gguf_string(std::move(v)));
}
void KeyWriter::i32_array(const std::string& key, const std::vector<int64_t>& v) {
  GgufArray a;
  a.elem = GgufType::I32;
  a.ints = v;
  kv_.set(full(key), gguf_array(std::move(a)));
}

void KeyWriter::bool_array(const std::string& key, const std::vector<int64_t>& v) {
  GgufArray a;
  a.elem = GgufType::Bool;
  a.ints = v;
  kv_.set(full(key), gguf_array(std::move(a)));
}

void KeyWriter::f32_array(const std::string& key, const std::vector<float>& v) {
  GgufArray a;
  a.elem = GgufType::F32;
  a.floats.assign(v.begin(), v.end());
  kv_.set(full(key), gguf_array(std::move(a)));
}

void KeyWriter::u32_from(const std::string& key, const json* hf) {
  if (hf == nullptr) return;
  if (!hf->is_number())
    fail(ErrorKind::Model, "config value for " + full(key) + " is not a number");
  u32(key, hf->get<int64_t>());
}

void KeyWriter::f32_from(const std::string& key, const json* hf) {
  if (hf == nullptr) return;
  if (!hf->is_number())
    fail(ErrorKind::Model, "config value for " + full(key) + " is not a number");
  f32(key, hf->get<double>());
}

const GgufValue* KeyWriter::find(const std::string& key) const {
  return kv_.find(full(key));
}

namespace {

const json* rope_value(const json& r, const char* key) {
  auto it = r.find(key);
  return it == r.end() || it->is_null() ? nullptr : &*it;
}

void write_rope_scaling(const Hparams& hp, KeyWriter& w) {
  const json& r = hp.rope_full();
  const json* type = rope_value(r, "rope_type");
  if (type == nullptr || !type->is_string()) return;
  const std::string t = type->get<std::string>();
  const json* factor = rope_value(r, "factor");
  if (t == "linear" && factor != nullptr) {
    w.str("rope.scaling.type", "linear");
    w.f32_from("rope.scaling.factor", factor);
  } else if (t == "yarn" && factor != nullptr) {
    w.str("rope.scaling.type", "yarn");
    w.f32_from("rope.scaling.factor", factor);
    const json* orig = rope_value(r, "original_max_position_embeddings");
    if (orig == nullptr)
      fail(ErrorKind::Model,
           hp.where() + ": yarn rope scaling without original_max_position_embeddings");
    w.u32_from("rope.scaling.original_context_length", orig);
    w.f32_from("rope.scaling.yarn_ext_factor", rope_value(r, "extrapolation_factor"));
    const json* attn = rope_value(r, "attention_factor");
    w.f32_from("rope.scaling.yarn_attn_factor", attn ? attn : rope_value(r, "attn_factor"));
    w.f32_from("rope.scaling.yarn_beta_fast", rope_value(r, "beta_fast"));
    w.f32_from("rope.scaling.yarn_beta_slow", rope_value(r, "beta_slow"));
  } else if (t == "su" || t == "longrope") {
    w.str("rope.scaling.type", "longrope");
  }
  // llama3: the rope_freqs tensor (convert_tensors.cpp); other types write nothing.
}

}  // namespace

void write_text_model_keys(const Hparams& hp, int64_t block_count, KeyWriter& w) {
  w.u32("block_count", block_count);
  w.u32_from("context_length", hp.find({"max_position_embeddings", "n_ctx", "n_positions",
                                        "max_length", "max_sequence_length", "model_max_length"}));
  w.u32_from("embedding_length", hp.find({"hidden_size", "n_embd", "dim"}));
  w.u32_from("feed_forward_length",
             hp.find({"prefix_dense_intermediate_size", "dense_intermediate_size",
                      "intermediate_size", "n_inner", "hidden_dim"}));
  w.u32_from("attention.head_count", hp.find({"num_attention_heads", "n_head", "n_heads"}));
  w.u32_from("attention.head_count_kv", hp.find({"num_key_value_heads", "n_kv_heads"}));
  if (const json* causal = hp.get("is_causal"); causal && causal->is_boolean() && !*causal)
    w.boolean("attention.causal", false);
  write_rope_scaling(hp, w);
  if (const json* m = rope_value(hp.rope(), "mrope_section"); m != nullptr && m->is_array()) {
    std::vector<int64_t> sections;
    for (const json& x : *m) sections.push_back(x.get<int64_t>());
    sections.resize(std::max<size_t>(sections.size(), 4), 0);
    sections.resize(4);
    w.i32_array("rope.dimension_sections", sections);
  }
  w.f32_from("rope.freq_base", rope_value(hp.rope_full(), "rope_theta"));
  if (const json* swa = rope_value(hp.rope(), "sliding_attention"); swa && swa->is_object())
    w.f32_from("rope.freq_base_swa", rope_value(*swa, "rope_theta"));
  w.f32_from("attention.layer_norm_rms_epsilon", hp.find({"rms_norm_eps", "norm_eps"}));
  w.f32_from("attention.layer_norm_epsilon",
             hp.find({"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"}));
  w.u32_from("expert_count", hp.find({"num_local_experts", "num_experts", "n_routed_experts"}));
  w.u32_from("expert_used_count",
             hp.find({"num_experts_per_tok", "num_experts_per_token", "top_k_experts"}));
  w.u32_from("expert_group_count", hp.get("n_group"));
  w.u32_from("expert_group_used_count", hp.get("topk_group"));
  if (const json* f =
          hp.find({"score_function", "scoring_func", "score_func", "moe_router_activation",
                   "moe_router_activation_func", "expert_selection_fn"})) {
    const std::string s = f->is_string() ? f->get<std::string>() : "";
    // llama.cpp's expert_gating_func: softmax 1, sigmoid 2, sqrt-softplus 4.
    const int64_t id = s == "softmax" ? 1 : s == "sigmoid" ? 2 : s == "sqrtsoftplus" ? 4 : 0;
    if (id == 0) fail(ErrorKind::Unsupported, hp.where() + ": scoring function '" + s + "'");
    w.u32("expert_gating_func", id);
  }
  if (const json* hd = hp.get("head_dim")) {
    w.u32_from("attention.key_length", hd);
    w.u32_from("attention.value_length", hd);
  }
}

void write_pooling_type(const ModelSource& source, KeyWriter& w) {
  const EmbeddingSpec e = read_embedding_spec(source);
  // llama.cpp's pooling_type: mean 1, cls 2, last 3 (only a declared pooling is written).
  if (e.pooling == Pooling::Mean) w.u32("pooling_type", 1);
  if (e.pooling == Pooling::Cls) w.u32("pooling_type", 2);
  if (e.pooling == Pooling::Last) w.u32("pooling_type", 3);
}

}  // namespace ts
