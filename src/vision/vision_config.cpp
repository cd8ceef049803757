#include "vision/vision_config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "model/config_view.h"
#include "model/model_source.h"

namespace ts {

int64_t VisionConfig::pos_side() const {
  return static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(n_pos))));
}

namespace {

void read_gguf(const ModelSource& s, const ConfigView& v, VisionConfig& c) {
  const auto projector = v.opt_string("projector_type", nullptr);
  if (projector.value_or("") != "qwen3vl_merger")
    v.invalid("clip.projector_type",
              "'" + projector.value_or("(none)") + "' is not supported (qwen3vl_merger is)");
  c.hidden = v.req_int("vision.embedding_length", nullptr);
  c.heads = v.req_int("vision.attention.head_count", nullptr);
  c.depth = v.req_int("vision.block_count", nullptr);
  c.ff = v.req_int("vision.feed_forward_length", nullptr);
  c.patch = v.req_int("vision.patch_size", nullptr);
  c.merge = v.opt_int("vision.spatial_merge_size", nullptr).value_or(2);
  c.out_hidden = v.req_int("vision.projection_dim", nullptr);
  c.eps = static_cast<float>(
      v.opt_float("vision.attention.layer_norm_epsilon", nullptr).value_or(1e-6));
  const auto ds = v.opt_gguf_ints("vision.is_deepstack_layers");
  if (ds)
    for (size_t i = 0; i < ds->size(); ++i)
      if ((*ds)[i] != 0) c.deepstack_layers.push_back(static_cast<int64_t>(i));
  // The converter splits the Conv3d into one 2-D kernel per frame: two of them.
  c.temporal = s.find("v.patch_embd.weight.1") ? 2 : 1;
  const auto pos = s.find("v.position_embd.weight");
  if (!pos || pos->dims.size() != 2) v.invalid("v.position_embd.weight", "missing or not 2-D");
  c.n_pos = static_cast<int64_t>(pos->dims[1]);
  read_gguf_normalisation(s, c.mean, c.std);
}

void read_hf(const ModelSource& s, const ConfigView& v, VisionConfig& c) {
  c.hidden = v.req_int(nullptr, "hidden_size");
  c.heads = v.req_int(nullptr, "num_heads");
  c.depth = v.req_int(nullptr, "depth");
  c.ff = v.req_int(nullptr, "intermediate_size");
  c.patch = v.req_int(nullptr, "patch_size");
  c.temporal = v.opt_int(nullptr, "temporal_patch_size").value_or(2);
  c.merge = v.opt_int(nullptr, "spatial_merge_size").value_or(2);
  c.out_hidden = v.req_int(nullptr, "out_hidden_size");
  c.n_pos = v.req_int(nullptr, "num_position_embeddings");
  c.channels = v.opt_int(nullptr, "in_channels").value_or(3);
  c.rope_theta =
      static_cast<float>(v.opt_float(nullptr, "rope_parameters/rope_theta").value_or(10000.0));
  const std::string act = v.opt_string(nullptr, "hidden_act").value_or("gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh" && act != "gelu")
    v.invalid("vision_config/hidden_act", "'" + act + "' is not supported");
  c.mlp_gelu_tanh = act == "gelu_pytorch_tanh";
  if (const nlohmann::json* ds = v.hf_value("deepstack_visual_indexes")) {
    if (!ds->is_array()) v.invalid("vision_config/deepstack_visual_indexes", "expected a list");
    for (const auto& x : *ds) {
      if (!x.is_number_integer())
        v.invalid("vision_config/deepstack_visual_indexes", "expected integers");
      c.deepstack_layers.push_back(x.get<int64_t>());
    }
  }
  // The normalisation is the processor's, in preprocessor_config.json beside config.json.
  std::ifstream in(s.path() + "/preprocessor_config.json");
  if (!in) return;
  const auto pre = nlohmann::json::parse(in, nullptr, false);
  for (const char* key : {"image_mean", "image_std"}) {
    auto it = pre.is_object() ? pre.find(key) : pre.end();
    if (it == pre.end()) continue;
    if (!it->is_array() || it->size() != 3)
      fail(ErrorKind::Model,
           s.path() + "/preprocessor_config.json: '" + key + "': expected 3 numbers");
    auto& dst = std::string(key) == "image_mean" ? c.mean : c.std;
    for (size_t i = 0; i < 3; ++i) dst[i] = (*it)[i].get<float>();
  }
  const auto bound = [&](const char* size_key, const char* legacy_key, int64_t& dst) {
    const nlohmann::json* v = nullptr;
    if (auto size = pre.find("size");
        size != pre.end() && size->is_object() && size->contains(size_key))
      v = &(*size)[size_key];
    else if (auto it = pre.find(legacy_key); it != pre.end())
      v = &*it;
    if (v == nullptr) return;
    if (!v->is_number_integer() || v->get<int64_t>() <= 0)
      fail(ErrorKind::Model,
           s.path() + "/preprocessor_config.json: '" + size_key + "': expected a positive integer");
    dst = v->get<int64_t>();
  };
  if (pre.is_object()) {
    bound("shortest_edge", "min_pixels", c.min_pixels);
    bound("longest_edge", "max_pixels", c.max_pixels);
  }
}

}  // namespace

void read_gguf_normalisation(const ModelSource& source, std::array<float, 3>& mean,
                             std::array<float, 3>& std) {
  for (const char* key : {"clip.vision.image_mean", "clip.vision.image_std"}) {
    const GgufArray* a = source.gguf()->get_array(key);
    if (a == nullptr) continue;
    if (a->floats.size() != 3)
      fail(ErrorKind::Model, source.path() + ": '" + key + "': expected 3 floats");
    auto& dst = std::string(key).ends_with("mean") ? mean : std;
    for (size_t i = 0; i < 3; ++i) dst[i] = static_cast<float>(a->floats[i]);
  }
}

VisionConfig read_vision_config(const ModelSource& source) {
  VisionConfig c;
  const bool gguf = source.gguf() != nullptr;
  const ConfigView v(source, gguf ? nullptr : "vision_config");
  if (gguf) {
    read_gguf(source, v, c);
  } else {
    if (v.hf_value("/vision_config") == nullptr)
      fail(ErrorKind::Model, source.path() + "/config.json: no vision_config (not a vision model)");
    read_hf(source, v, c);
  }
  const auto in = [&](const char* what, int64_t x, int64_t lo, int64_t hi) {
    if (x < lo || x > hi)
      v.invalid(what, std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
  };
  in("vision hidden size", c.hidden, 1, 1 << 16);
  in("vision heads", c.heads, 1, 1024);
  in("vision blocks", c.depth, 1, 1024);
  in("vision MLP width", c.ff, 1, 1 << 18);
  in("patch size", c.patch, 1, 1024);
  in("temporal patch size", c.temporal, 1, 16);
  in("spatial merge size", c.merge, 1, 16);
  in("projection width", c.out_hidden, 1, 1 << 20);
  in("position table rows", c.n_pos, 1, 1 << 20);
  in("input channels", c.channels, 3, 3);
  if (c.hidden % c.heads != 0 || c.head_dim() % 4 != 0)
    v.invalid("vision heads", "hidden " + std::to_string(c.hidden) + " / " +
                                  std::to_string(c.heads) +
                                  " heads is not a head width divisible by 4 (2-D rotary)");
  if (c.pos_side() * c.pos_side() != c.n_pos)
    v.invalid("position table rows", std::to_string(c.n_pos) + " is not a square grid");
  for (int64_t l : c.deepstack_layers) in("deepstack layer", l, 0, c.depth - 1);
  if (c.min_pixels > c.max_pixels)
    v.invalid("min_pixels", std::to_string(c.min_pixels) + " is above max_pixels " +
                                std::to_string(c.max_pixels));
  for (float s : c.std)
    if (!(s > 0)) v.invalid("image_std", "must be positive");
  return c;
}

}  // namespace ts
