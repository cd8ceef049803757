// The mmproj half of `convert` (convert_mmproj.h): MmprojModel's clip.vision.* keys from the
// vision_config and preprocessor_config.json, then per tower class its own keys and the renaming
// of its tensors (a block's parts by table, the rest one by one), as the converter's class does.
#include "model/convert_mmproj.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_nesting.h"
#include "formats/safetensors.h"
#include "model/convert_family.h"
#include "model/model_source.h"

namespace ts {
namespace {

using nlohmann::json;

// The vision_config, with the values the class fills in before MmprojModel reads it.
struct Vision {
  json cfg;
  json preprocessor;
  json global;  // config.json
  std::string where;

  const json* find(std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
      if (auto it = cfg.find(k); it != cfg.end()) return &*it;
    return nullptr;
  }
  int64_t req(std::initializer_list<const char*> keys) const {
    const json* v = find(keys);
    if (v == nullptr || !v->is_number_integer())
      fail(ErrorKind::Model, where + ": vision_config lacks integer '" + *keys.begin() + "'");
    return v->get<int64_t>();
  }
};

// A block part's HF name (after "<blocks>.N.") and its GGUF name (after "v.blk.N.").
struct Rename {
  const char* hf;
  const char* gguf;
};

struct MmprojClass {
  const char* hf_class;
  const char* tower_prefixes[3];  // a tensor of the tower starts with one (after "model.")
  const char* blocks;             // the blocks' prefix, before the block index
  const Rename* block_parts;      // ends at {nullptr, nullptr}
  void (*prepare)(Vision& v);
  void (*keys)(const Vision& v, KeyWriter& w);
  // A tensor not in a block: false when the class does not know it.
  bool (*other)(const TensorRef& t, const std::string& name, const Vision& v,
                std::vector<ConvertTensor>& out);
  // The GGUF name's last part from the HF one's ("linear.weight" -> "weight").
  std::string (*suffix)(const std::string& hf);
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

uint64_t count(const std::vector<uint64_t>& dims) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

// What a tower class forces a tensor's type to (its tensor_force_quant); a vector or a norm is
// f32 all the same.
enum class Forced { No, F32, F16, F16InF16File };

// The converter's type rule for an mmproj tensor.
ConvertTensor tensor(const std::string& gguf, std::vector<uint64_t> dims,
                     std::function<void(float*)> values, Forced forced = Forced::No) {
  if (dims.empty()) dims = {1};  // a scalar as a vector of one
  const bool vector_or_norm = dims.size() <= 1 || ends_with(gguf, "_norm.weight");
  const bool f32 = vector_or_norm || forced == Forced::F32 ||
                   (forced == Forced::No && converter_keeps_f32(gguf, dims.size()));
  ConvertTensor c{gguf, dims, f32, std::move(values)};
  if (!vector_or_norm) {
    c.f16_always = forced == Forced::F16;
    c.f16_in_f16_file = forced == Forced::F16InF16File;
  }
  return c;
}

ConvertTensor plain(const TensorRef& t, const std::string& gguf, Forced forced = Forced::No) {
  return tensor(
      gguf, t.dims, [t](float* v) { read_f32(t, v); }, forced);
}

std::vector<float> f32_array(const Vision& v, const char* key) {
  const auto it = v.preprocessor.find(key);
  if (it == v.preprocessor.end() || !it->is_array())
    fail(ErrorKind::Model, v.where + ": preprocessor_config.json lacks '" + key + "'");
  return it->get<std::vector<float>>();
}

// MmprojModel.set_gguf_parameters (vision).
void mmproj_keys(const Vision& v, KeyWriter& w) {
  w.u32("general.file_type", 0);  // the writer sets the output's
  w.boolean("has_vision_encoder", true);
  json text = v.global;
  if (auto t = v.global.find("text_config"); t != v.global.end() && t->is_object())
    for (const auto& [k, x] : t->items()) text[k] = x;
  const json* hidden = text.contains("hidden_size") ? &text["hidden_size"]
                       : text.contains("n_embd")    ? &text["n_embd"]
                                                    : nullptr;
  if (hidden == nullptr || !hidden->is_number_integer())
    fail(ErrorKind::Model, v.where + ": no text hidden_size");
  w.u32("vision.projection_dim", hidden->get<int64_t>());
  w.u32("vision.image_size", v.req({"image_size"}));
  w.u32("vision.patch_size", v.req({"patch_size"}));
  w.u32("vision.embedding_length", v.req({"hidden_size", "width", "vt_hidden_size"}));
  w.u32("vision.feed_forward_length", v.req({"intermediate_size", "vt_intermediate_size"}));
  w.u32("vision.block_count", v.req({"n_layers", "num_hidden_layers", "n_layer", "num_layers",
                                     "depth", "layers", "encoder_layers", "vt_num_hidden_layers"}));
  w.u32("vision.attention.head_count",
        v.req({"num_attention_heads", "num_heads", "heads", "vt_num_attention_heads"}));
  w.f32_array("vision.image_mean", f32_array(v, "image_mean"));
  w.f32_array("vision.image_std", f32_array(v, "image_std"));
}

double number(const json& j, const char* key, double fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// ---- Qwen3-VL (Qwen3VLVisionModel) ----

constexpr Rename kQwen3VLBlock[] = {{"attn.proj.", "attn_out."},
                                    {"attn.qkv.", "attn_qkv."},
                                    {"mlp.linear_fc1.", "ffn_up."},
                                    {"mlp.linear_fc2.", "ffn_down."},
                                    {"norm1.", "ln1."},
                                    {"norm2.", "ln2."},
                                    {nullptr, nullptr}};

void qwen3vl_prepare(Vision& v) {
  if (!v.cfg.contains("image_size")) {
    const double pos = number(v.cfg, "num_position_embeddings", 2304);
    const double patch = number(v.cfg, "patch_size", 16);
    v.cfg["image_size"] = static_cast<int64_t>(std::sqrt(pos) * patch);
  }
  v.cfg["num_attention_heads"] = v.cfg.value("num_heads", json());
  v.cfg["num_hidden_layers"] = v.cfg.value("depth", json());
}

std::vector<int64_t> deepstack_indexes(const Vision& v) {
  const json* d = v.find({"deepstack_visual_indexes"});
  return d != nullptr && d->is_array() ? d->get<std::vector<int64_t>>() : std::vector<int64_t>{};
}

void qwen3vl_keys(const Vision& v, KeyWriter& w) {
  w.str("projector_type", "qwen3vl_merger");
  w.boolean("use_gelu", true);
  w.u32_from("vision.spatial_merge_size", v.find({"spatial_merge_size"}));
  const auto text = v.global.find("text_config");
  w.f32("vision.attention.layer_norm_epsilon",
        text != v.global.end() && text->is_object() ? number(*text, "rms_norm_eps", 1e-6) : 1e-6);
  const int64_t depth = v.req({"num_hidden_layers"});
  if (depth > 0) {
    std::vector<int64_t> deep(static_cast<size_t>(depth), 0);
    for (int64_t i : deepstack_indexes(v))
      if (i >= 0 && i < depth) deep[static_cast<size_t>(i)] = 1;
    w.bool_array("vision.is_deepstack_layers", deep);
  }
}

bool qwen3vl_other(const TensorRef& t, const std::string& name, const Vision& v,
                   std::vector<ConvertTensor>& out) {
  const std::string ds = "visual.deepstack_merger_list.";
  if (name.starts_with(ds)) {
    const size_t dot = name.find('.', ds.size());
    const size_t i = std::stoul(name.substr(ds.size(), dot - ds.size()));
    const std::vector<int64_t> idx = deepstack_indexes(v);
    if (i >= idx.size())
      fail(ErrorKind::Model, v.where + ": " + name + " is past deepstack_visual_indexes");
    const std::string rest = name.substr(dot + 1);
    const std::string base = "v.deepstack." + std::to_string(idx[i]) + ".";
    for (const auto& [hf, gguf] :
         {std::pair{"norm.", "norm."}, {"linear_fc1.", "fc1."}, {"linear_fc2.", "fc2."}})
      if (rest.starts_with(hf)) {
        out.push_back(plain(t, base + gguf + rest.substr(std::strlen(hf))));
        return true;
      }
    return false;
  }
  for (const auto& [hf, gguf] : {std::pair{"visual.merger.linear_fc1.", "mm.0."},
                                 {"visual.merger.linear_fc2.", "mm.2."},
                                 {"visual.merger.norm.", "v.post_ln."},
                                 {"visual.pos_embed.", "v.position_embd."}})
    if (name.starts_with(hf)) {
      out.push_back(plain(t, gguf + name.substr(std::strlen(hf))));
      return true;
    }
  if (name == "visual.patch_embed.proj.bias") {
    out.push_back(plain(t, "v.patch_embd.bias"));
    return true;
  }
  if (name == "visual.patch_embed.proj.weight") {
    // Conv3D [out][in][2 frames][p][p] as one Conv2D per frame.
    if (t.dims.size() != 5 || t.dims[2] != 2)
      fail(ErrorKind::Unsupported, v.where + ": " + name + " has shape " + t.shape_string() +
                                       " (convert splits a temporal patch of 2 frames)");
    const uint64_t plane = t.dims[0] * t.dims[1], planes = t.dims[3] * t.dims[4];
    for (uint64_t frame = 0; frame < 2; ++frame)
      out.push_back(tensor(
          frame == 0 ? "v.patch_embd.weight" : "v.patch_embd.weight.1",
          {t.dims[0], t.dims[1], t.dims[3], t.dims[4]},
          [t, plane, planes, frame](float* v) {
            std::vector<float> all(count(t.dims));
            read_f32(t, all.data());
            for (uint64_t oc = 0; oc < planes; ++oc)
              std::copy_n(all.data() + (oc * 2 + frame) * plane, plane, v + oc * plane);
          },
          Forced::F16InF16File));
    return true;
  }
  return false;
}

// ---- Gemma 3 (Gemma3VisionModel: SigLIP and the soft-embedding projector) ----

constexpr Rename kSiglipBlock[] = {{"layer_norm1.", "ln1."},
                                   {"layer_norm2.", "ln2."},
                                   {"mlp.fc1.", "ffn_up."},
                                   {"mlp.fc2.", "ffn_down."},
                                   {"self_attn.q_proj.", "attn_q."},
                                   {"self_attn.k_proj.", "attn_k."},
                                   {"self_attn.v_proj.", "attn_v."},
                                   {"self_attn.out_proj.", "attn_out."},
                                   {nullptr, nullptr}};

void gemma3_keys(const Vision& v, KeyWriter& w) {
  w.str("projector_type", "gemma3");
  w.f32("vision.attention.layer_norm_epsilon", number(v.cfg, "layer_norm_eps", 1e-6));
  w.boolean("use_gelu", true);
  // The pooling of the patches to the image's tokens, written when not Gemma 3's 4.
  const auto per_side =
      static_cast<int64_t>(std::sqrt(number(v.preprocessor, "image_seq_length", 256)));
  const int64_t scale = per_side > 0 ? v.req({"image_size"}) / v.req({"patch_size"}) / per_side : 0;
  if (scale > 0 && scale != 4) w.u32("vision.projector.scale_factor", scale);
}

bool gemma3_other(const TensorRef& t, const std::string& name, const Vision&,
                  std::vector<ConvertTensor>& out) {
  if (name == "multi_modal_projector.mm_input_projection_weight") {
    out.push_back(plain(t, "mm.input_projection.weight", Forced::F16));
    return true;
  }
  if (name == "multi_modal_projector.mm_soft_emb_norm.weight") {
    out.push_back(tensor("mm.soft_emb_norm.weight", t.dims, [t](float* v) {
      read_f32(t, v);
      for (uint64_t i = 0; i < count(t.dims); ++i) v[i] += 1.0f;  // Gemma's (1 + w) norm
    }));
    return true;
  }
  const std::string emb = "vision_tower.vision_model.embeddings.";
  for (const auto& [hf, gguf] : {std::pair{"patch_embedding.", "v.patch_embd."},
                                 {"position_embedding.", "v.position_embd."}})
    if (name.starts_with(emb + hf)) {
      out.push_back(plain(t, gguf + name.substr(emb.size() + std::strlen(hf)), Forced::F32));
      return true;
    }
  if (name.starts_with("vision_tower.vision_model.post_layernorm.")) {
    out.push_back(plain(
        t, "v.post_ln." + name.substr(std::strlen("vision_tower.vision_model.post_layernorm."))));
    return true;
  }
  return false;
}

// ---- Gemma 4 (Gemma4VisionAudioModel, its vision half) ----

constexpr Rename kGemma4Block[] = {{"input_layernorm.", "ln1."},
                                   {"post_attention_layernorm.", "attn_post_norm."},
                                   {"pre_feedforward_layernorm.", "ln2."},
                                   {"post_feedforward_layernorm.", "ffn_post_norm."},
                                   {"mlp.gate_proj.", "ffn_gate."},
                                   {"mlp.up_proj.", "ffn_up."},
                                   {"mlp.down_proj.", "ffn_down."},
                                   {"self_attn.q_proj.", "attn_q."},
                                   {"self_attn.k_proj.", "attn_k."},
                                   {"self_attn.v_proj.", "attn_v."},
                                   {"self_attn.o_proj.", "attn_out."},
                                   {"self_attn.q_norm.", "attn_q_norm."},
                                   {"self_attn.k_norm.", "attn_k_norm."},
                                   {"layer_scalar", "out_scale.weight"},
                                   {nullptr, nullptr}};

void gemma4_prepare(Vision& v) {
  if (v.global.contains("audio_config") && !v.global["audio_config"].is_null())
    fail(
        ErrorKind::Unsupported,
        v.where + ": Gemma 4's audio tower is not converted (convert --mmproj writes vision only)");
  v.cfg["image_size"] = 224;  // the converter's placeholder: Gemma 4 takes any size
}

void gemma4_keys(const Vision& v, KeyWriter& w) {
  w.str("vision.projector_type", "gemma4v");
  w.f32("vision.attention.layer_norm_epsilon", number(v.cfg, "layer_norm_eps", 1e-6));
}

bool gemma4_other(const TensorRef& t, const std::string& name, const Vision& v,
                  std::vector<ConvertTensor>& out) {
  if (name == "embed_vision.embedding_projection.weight") {
    out.push_back(plain(t, "mm.input_projection.weight"));
    return true;
  }
  if (name == "vision_tower.patch_embedder.position_embedding_table") {
    out.push_back(plain(t, "v.position_embd.weight", Forced::F32));
    return true;
  }
  if (name == "vision_tower.std_bias" || name == "vision_tower.std_scale") {
    out.push_back(plain(t, "v." + name.substr(std::strlen("vision_tower."))));
    return true;
  }
  if (name == "vision_tower.patch_embedder.input_proj.weight") {
    // [out][p * p * 3] (pixels, then channels) as a Conv2D's [out][3][p][p].
    const uint64_t n_out = t.dims[1], in = t.dims[0];
    const auto p = static_cast<uint64_t>(std::lround(std::sqrt(static_cast<double>(in / 3))));
    if (t.dims.size() != 2 || p * p * 3 != in)
      fail(ErrorKind::Model,
           v.where + ": " + name + " has shape " + t.shape_string() + " (not p * p * 3 inputs)");
    out.push_back(tensor(
        "v.patch_embd.weight", {p, p, 3, n_out},
        [t, p, in, n_out](float* v) {
          std::vector<float> all(count(t.dims));
          read_f32(t, all.data());
          for (uint64_t o = 0; o < n_out; ++o)
            for (uint64_t c = 0; c < 3; ++c)
              for (uint64_t yx = 0; yx < p * p; ++yx)
                v[(o * 3 + c) * p * p + yx] = all[o * in + yx * 3 + c];
        },
        Forced::F16InF16File));
    return true;
  }
  return false;
}

std::string same_suffix(const std::string& hf) {
  return hf;
}

// Gemma 4's clipped linears keep their bounds beside the weight: "linear.weight" is the weight.
std::string gemma4_suffix(const std::string& hf) {
  return hf == "linear.weight" ? "weight" : hf;
}

// Qwen3-VL's tower, which Qwen3-VL-MoE's classes share (one converter class for both).
MmprojClass qwen3vl_class(const char* hf_class) {
  return {hf_class,         {"visual.", nullptr, nullptr},
          "visual.blocks.", kQwen3VLBlock,
          qwen3vl_prepare,  qwen3vl_keys,
          qwen3vl_other,    same_suffix};
}

const MmprojClass kClasses[] = {
    qwen3vl_class("Qwen3VLForConditionalGeneration"),
    qwen3vl_class("Qwen3VLMoeForConditionalGeneration"),
    {"Gemma3ForConditionalGeneration",
     {"vision_tower.", "multi_modal_projector.", nullptr},
     "vision_tower.vision_model.encoder.layers.",
     kSiglipBlock,
     nullptr,
     gemma3_keys,
     gemma3_other,
     same_suffix},
    {"Gemma4ForConditionalGeneration",
     {"vision_tower.", "embed_vision.", nullptr},
     "vision_tower.encoder.layers.",
     kGemma4Block,
     gemma4_prepare,
     gemma4_keys,
     gemma4_other,
     gemma4_suffix},
};

std::string class_names() {
  std::string s;
  for (const MmprojClass& c : kClasses) s += (s.empty() ? "" : ", ") + std::string(c.hf_class);
  return s;
}

// A block tensor of the class's table under its v.blk name; false when it is not one.
bool block_tensor(const MmprojClass& c, const TensorRef& t, const std::string& name,
                  std::vector<ConvertTensor>& out) {
  if (!name.starts_with(c.blocks)) return false;
  const size_t at = std::strlen(c.blocks), dot = name.find('.', at);
  if (dot == std::string::npos) return false;
  const std::string block = name.substr(at, dot - at), part = name.substr(dot + 1);
  for (const Rename* r = c.block_parts; r->hf != nullptr; ++r) {
    const std::string hf = r->hf;
    if (part == hf || (hf.ends_with('.') && part.starts_with(hf))) {
      const std::string rest = part.substr(hf.size());
      out.push_back(plain(t, "v.blk." + block + "." + r->gguf + c.suffix(rest)));
      return true;
    }
  }
  return false;
}

}  // namespace

ConvertedModel convert_hf_mmproj(const ModelSource& source) {
  if (source.hf() == nullptr)
    fail(ErrorKind::Usage, source.path() + ": convert reads a Hugging Face directory, not a GGUF");
  const std::string hf_class = source.architecture();
  const MmprojClass* c = nullptr;
  for (const MmprojClass& k : kClasses)
    if (hf_class == k.hf_class) c = &k;
  if (c == nullptr)
    fail(ErrorKind::Unsupported, source.path() + ": convert --mmproj does not handle '" + hf_class +
                                     "' (it converts the vision of " + class_names() + ")");
  Vision v;
  v.where = source.path() + "/config.json";
  v.global = source.hf()->config();
  if (!v.global.contains("vision_config") || !v.global["vision_config"].is_object())
    fail(ErrorKind::Model, v.where + ": no vision_config");
  v.cfg = v.global["vision_config"];
  const std::string pre = source.path() + "/preprocessor_config.json";
  if (std::filesystem::is_regular_file(pre)) v.preprocessor = parse_json_file(pre);
  if (c->prepare != nullptr) c->prepare(v);

  ConvertedModel m;
  m.arch = "clip";
  KeyWriter w(m.kv, "clip");
  w.str("general.architecture", "clip");
  w.str("general.type", "mmproj");
  write_model_name(source, w);
  w.str("general.size_label", "");  // set below, once the tensors are known
  mmproj_keys(v, w);
  c->keys(v, w);
  w.u32("general.quantization_version", 2);

  std::vector<TensorRef> all = source.all_tensors();
  std::sort(all.begin(), all.end(),
            [](const TensorRef& a, const TensorRef& b) { return a.name < b.name; });
  for (const TensorRef& t : all) {
    const std::string name = t.name.starts_with("model.") ? t.name.substr(6) : t.name;
    const bool tower =
        std::any_of(std::begin(c->tower_prefixes), std::end(c->tower_prefixes),
                    [&](const char* p) { return p != nullptr && name.starts_with(p); });
    if (!tower || name.find("vision_model.head.") != std::string::npos) continue;
    if (!block_tensor(*c, t, name, m.tensors) && !c->other(t, name, v, m.tensors))
      fail(ErrorKind::Unsupported, source.path() + ": tensor '" + t.name +
                                       "' has no mmproj name (a part of " + hf_class +
                                       "'s vision that convert does not know)");
  }
  w.str("general.size_label", gguf_size_label(m.tensors));
  return m;
}

}  // namespace ts
