// qwen3vl: Qwen3-VL's text decoder. Qwen3 (per-head q/k norm) with M-RoPE, each frequency pair
// rotated by one of a token's three positions (time, height, width; interleaved in Qwen3-VL), and
// DeepStack: features of the first vision layers added to the hidden states at the image rows.
// The HF checkpoint keeps the text model's values under text_config (ModelSource's text decoder).
#include <nlohmann/json.hpp>

#include "model/config_view.h"
#include "model/family.h"

namespace ts {
namespace {

std::vector<int64_t> hf_mrope_sections(const ConfigView& v, bool& interleaved) {
  for (const char* params : {"rope_parameters", "rope_scaling"}) {
    const nlohmann::json* p = v.hf_value(params);
    if (p == nullptr || !p->is_object() || !p->contains("mrope_section")) continue;
    const nlohmann::json& s = (*p)["mrope_section"];
    if (!s.is_array()) v.invalid(std::string(params) + "/mrope_section", "expected a list");
    std::vector<int64_t> out;
    for (const auto& x : s) {
      if (!x.is_number_integer())
        v.invalid(std::string(params) + "/mrope_section", "expected integers");
      out.push_back(x.get<int64_t>());
    }
    auto il = p->find("mrope_interleaved");
    interleaved = il != p->end() && il->is_boolean() && il->get<bool>();
    return out;
  }
  v.missing(nullptr, "rope_parameters/mrope_section");
}

}  // namespace

void configure_qwen3vl(const ConfigView& v, ArchConfig& c) {
  read_common(v, c);
  c.qk_norm = QkNorm::PerHead;
  std::vector<int64_t> sections;
  if (v.is_gguf()) {
    // llama.cpp's qwen3vl always rotates interleaved (its IMROPE); the fourth section is unused.
    sections = v.opt_gguf_ints("rope.dimension_sections").value_or(std::vector<int64_t>{});
    if (sections.empty()) v.missing("rope.dimension_sections", nullptr);
    c.mrope_interleaved = true;
    c.n_deepstack = v.opt_int("n_deepstack_layers", nullptr).value_or(0);
  } else {
    read_hf_rope_scaling(v, c, "rope_parameters");
    sections = hf_mrope_sections(v, c.mrope_interleaved);
    if (!c.mrope_interleaved)
      v.invalid("rope_parameters/mrope_interleaved",
                "contiguous M-RoPE sections (Qwen2-VL) are not supported");
    if (const nlohmann::json* ds = v.hf_value("/vision_config/deepstack_visual_indexes")) {
      if (!ds->is_array()) v.invalid("vision_config/deepstack_visual_indexes", "expected a list");
      c.n_deepstack = static_cast<int64_t>(ds->size());
    }
    // transformers reads tie_word_embeddings from the top-level config of this class.
    c.tied_embeddings = v.opt_bool(nullptr, "/tie_word_embeddings")
                            .value_or(v.opt_bool(nullptr, "tie_word_embeddings").value_or(false));
  }
  while (sections.size() > 3 && sections.back() == 0) sections.pop_back();
  if (sections.size() != 3)
    v.invalid("mrope sections",
              std::to_string(sections.size()) + " sections (3 expected: T, H, W)");
  int64_t sum = 0;
  for (int64_t s : sections) {
    if (s < 0) v.invalid("mrope sections", "a negative section");
    sum += s;
  }
  if (sum <= 0 || 2 * sum > c.rotary_dim)
    v.invalid("mrope sections", "their sum " + std::to_string(sum) + " is not within [1, " +
                                    std::to_string(c.rotary_dim / 2) + "] frequency pairs");
  if (c.n_deepstack < 0 || c.n_deepstack > c.n_layer)
    v.invalid("deepstack layers",
              std::to_string(c.n_deepstack) + " is outside [0, " + std::to_string(c.n_layer) + "]");
  c.mrope_sections = sections;
}

}  // namespace ts
