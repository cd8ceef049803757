// DeepseekV2Model (DeepSeek-V3 / R1, Kimi K2): MLA's sizes, DeepSeek's routing keys, and its
// tensors: kv_b_proj split per head into attn_k_b (transposed) and attn_v_b; the MTP layers after
// the decoder's are not converted.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/convert_family.h"
#include "model/model_source.h"
#include "model/tensor_names.h"

namespace ts {
using nlohmann::json;

void deepseek2_keys(const Hparams& hp, const ModelSource&, KeyWriter& w) {
  // The class sets these before TextModel writes its keys: latent attention is one kv head.
  w.u32("attention.head_count_kv", 1);
  if (hp.find({"rms_norm_eps", "norm_eps"}) == nullptr)
    w.f32("attention.layer_norm_rms_epsilon", 1e-6);
  const bool moe = hp.get("n_routed_experts") != nullptr;
  const json* dense = hp.get("first_k_dense_replace");
  w.u32("leading_dense_block_count",
        dense != nullptr ? dense->get<int64_t>() : (moe ? 0 : hp.req_int("num_hidden_layers")));
  w.u32("vocab_size", hp.req_int("vocab_size"));
  w.u32_from("attention.q_lora_rank", hp.get("q_lora_rank"));
  const json* kv = hp.get("kv_lora_rank");
  const int64_t kv_lora = kv != nullptr ? kv->get<int64_t>() : 512;
  const int64_t rope = hp.req_int("qk_rope_head_dim");
  w.u32("attention.kv_lora_rank", kv_lora);
  w.u32("attention.key_length", kv_lora + rope);
  w.u32("attention.value_length", kv_lora);
  w.u32("attention.key_length_mla", hp.req_int("qk_nope_head_dim") + rope);
  w.u32("attention.value_length_mla", hp.req_int("v_head_dim"));
  w.u32_from("expert_feed_forward_length", hp.find({"moe_intermediate_size", "intermediate_size"}));
  w.u32_from("expert_count", hp.get("n_routed_experts"));
  const json* shared = hp.get("n_shared_experts");
  w.u32("expert_shared_count", shared != nullptr ? shared->get<int64_t>() : 0);
  w.f32_from("expert_weights_scale", hp.get("routed_scaling_factor"));
  if (const json* norm = hp.get("norm_topk_prob"); norm != nullptr && norm->is_boolean() && *norm)
    w.boolean("expert_weights_norm", true);
  w.u32("rope.dimension_count", rope);
  if (auto m = hp.rope().find("mscale_all_dim"); m != hp.rope().end() && m->is_number())
    w.f32("rope.scaling.yarn_log_multiplier", 0.1 * m->get<double>());
}

bool deepseek2_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource& src,
                      std::vector<ConvertTensor>& out) {
  if (layer >= hp.req_int("num_hidden_layers")) return true;  // an MTP layer: skipped
  if (!t.name.ends_with("self_attn.kv_b_proj.weight")) return false;
  const int64_t heads = hp.req_int("num_key_value_heads");
  const int64_t nope = hp.req_int("qk_nope_head_dim");
  const int64_t v_dim = hp.req_int("v_head_dim");
  const auto lora = static_cast<int64_t>(t.dims[0]);
  if (static_cast<int64_t>(t.dims[1]) != heads * (nope + v_dim))
    fail(ErrorKind::Model, src.path() + ": tensor '" + t.name + "' has shape " + t.shape_string() +
                               ", not [kv_lora_rank, heads x (nope + v)]");
  const auto per_head = [=](float* whole, int64_t h, int64_t row) {
    return whole + (h * (nope + v_dim) + row) * lora;
  };
  // k_b: per head [lora][nope], the head's first nope rows transposed; v_b: its last v rows.
  ConvertTensor k_b(
      gguf_name(Family::DeepSeek2, LayerTensor::MlaKb, layer),
      {static_cast<uint64_t>(nope), static_cast<uint64_t>(lora), static_cast<uint64_t>(heads)},
      false, nullptr);
  k_b.values = [=](float* v) {
    std::vector<float> whole(t.dims[0] * t.dims[1]);
    read_f32(t, whole.data());
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t c = 0; c < lora; ++c)
        for (int64_t r = 0; r < nope; ++r)
          v[(h * lora + c) * nope + r] = per_head(whole.data(), h, r)[c];
  };
  ConvertTensor v_b(
      gguf_name(Family::DeepSeek2, LayerTensor::MlaVb, layer),
      {static_cast<uint64_t>(lora), static_cast<uint64_t>(v_dim), static_cast<uint64_t>(heads)},
      false, nullptr);
  v_b.values = [=](float* v) {
    std::vector<float> whole(t.dims[0] * t.dims[1]);
    read_f32(t, whole.data());
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < v_dim; ++r)
        std::copy(per_head(whole.data(), h, nope + r), per_head(whole.data(), h, nope + r) + lora,
                  v + (h * v_dim + r) * lora);
  };
  out.push_back(std::move(k_b));
  out.push_back(std::move(v_b));
  return true;
}

}  // namespace ts
