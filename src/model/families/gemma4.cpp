// gemma4: Gemma 3's block (sandwich norms, GELU-tanh, per-head q/k norm, sliding and global layers
// with their own rope bases) with layers of two attention shapes (the global ones wider, fewer kv
// heads, "proportional" partial rope, optionally k = v), a weightless v norm, attention scale 1,
// plain x * w norms, KV sharing between the last layers, per-layer embeddings, a scalar on each
// layer's output, and in the MoE sizes a dense FFN beside the routed experts.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "model/config_view.h"
#include "model/family.h"

namespace ts {
namespace {

// A GGUF key that holds one value for every layer or an array of one per layer.
std::vector<int64_t> per_layer_ints(const ConfigView& v, const char* key, int64_t n_layer,
                                    std::optional<int64_t> fallback) {
  if (v.gguf_is_array(key)) {
    const auto a = v.opt_gguf_ints(key);
    if (static_cast<int64_t>(a->size()) != n_layer)
      v.invalid(key, "expected one entry per layer (" + std::to_string(n_layer) + "), got " +
                         std::to_string(a->size()));
    return *a;
  }
  auto one = v.opt_int(key, nullptr);
  if (!one) one = fallback;
  if (!one) v.missing(key, nullptr);
  return std::vector<int64_t>(static_cast<size_t>(n_layer), *one);
}

// The layer whose KV rows each layer reads: the last `shared` layers read the last earlier layer of
// their own type (sliding or global), as transformers' kv_sharing_modes picks it.
void share_kv(const ConfigView& v, ArchConfig& c, int64_t shared, const char* key) {
  if (shared < 0 || shared >= c.n_layer)
    v.invalid(key, std::to_string(shared) + " is not within [0, layers " +
                       std::to_string(c.n_layer) + ")");
  c.layer_kv_source.resize(static_cast<size_t>(c.n_layer));
  const int64_t first = c.n_layer - shared;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    int64_t src = l;
    if (l >= first) {
      src = -1;
      for (int64_t j = first - 1; j >= 0 && src < 0; --j)
        if (c.layer_sliding[static_cast<size_t>(j)] == c.layer_sliding[static_cast<size_t>(l)])
          src = j;
      if (src < 0)
        v.invalid(key,
                  "layer " + std::to_string(l) +
                      " shares the KV rows of an earlier layer of its type, but none holds any");
    }
    c.layer_kv_source[static_cast<size_t>(l)] = static_cast<int32_t>(src);
  }
}

void read_sizes(const ConfigView& v, ArchConfig& c) {
  c.source = v.kind();
  c.n_layer = v.req_int("block_count", "num_hidden_layers");
  if (c.n_layer <= 0 || c.n_layer > 4096)
    v.invalid("block count", std::to_string(c.n_layer) + " is out of range [1, 4096]");
  c.n_embd = v.req_int("embedding_length", "hidden_size");
  c.n_head = v.req_int("attention.head_count", "num_attention_heads");
  c.ctx_train = v.opt_int("context_length", "max_position_embeddings").value_or(0);
  c.rms_eps = static_cast<float>(v.req_float("attention.layer_norm_rms_epsilon", "rms_norm_eps"));
  c.layer_sliding.assign(static_cast<size_t>(c.n_layer), 0);
  c.layer_moe.assign(c.layer_sliding.size(), 0);
  c.layer_mixer.assign(c.layer_sliding.size(), MixerKind::Attention);
  c.sliding_window = v.req_int("attention.sliding_window", "sliding_window");
  c.final_softcap = static_cast<float>(
      v.opt_float("final_logit_softcapping", "final_logit_softcapping").value_or(0));
}

void read_gguf(const ConfigView& v, ArchConfig& c) {
  const auto pattern = v.opt_gguf_ints("attention.sliding_window_pattern");
  if (!pattern) v.missing("attention.sliding_window_pattern", nullptr);
  if (static_cast<int64_t>(pattern->size()) != c.n_layer)
    v.invalid("attention.sliding_window_pattern", "expected one entry per layer");
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.layer_sliding[static_cast<size_t>(l)] = (*pattern)[static_cast<size_t>(l)] != 0;
  const int64_t hd_global = v.req_int("attention.key_length", nullptr);
  const int64_t hd_local = v.req_int("attention.key_length_swa", nullptr);
  if (v.opt_int("attention.value_length", nullptr).value_or(hd_global) != hd_global)
    v.invalid("attention.value_length", "differs from key_length (not supported)");
  if (v.opt_int("attention.value_length_swa", nullptr).value_or(hd_local) != hd_local)
    v.invalid("attention.value_length_swa", "differs from key_length_swa (not supported)");
  const std::vector<int64_t> kv = per_layer_ints(v, "attention.head_count_kv", c.n_layer, c.n_head);
  c.layer_n_ff = per_layer_ints(v, "feed_forward_length", c.n_layer, std::nullopt);
  c.layer_head_dim.resize(static_cast<size_t>(c.n_layer));
  for (size_t l = 0; l < c.layer_head_dim.size(); ++l)
    c.layer_head_dim[l] = c.layer_sliding[l] ? hd_local : hd_global;
  c.layer_n_head_kv = kv;
  c.rope_theta = static_cast<float>(v.opt_float("rope.freq_base", nullptr).value_or(1e6));
  c.rope_theta_local = static_cast<float>(v.opt_float("rope.freq_base_swa", nullptr).value_or(1e4));
  // The proportional rope of the global layers is the rope_freqs tensor (1 for a rotated pair,
  // 1e30 for the others), read by the engine.
  share_kv(v, c, v.opt_int("attention.shared_kv_layers", nullptr).value_or(0),
           "attention.shared_kv_layers");
  c.n_embd_per_layer = v.opt_int("embedding_length_per_layer_input", nullptr).value_or(0);
  // The GGUF does not say how image rows attend. llama.cpp (mtmd) decides by the text width:
  // E2B's 1536 and E4B's 2560 causally, as their checkpoints do, every other model both ways on
  // the sliding layers. Its rule, not a guess of ours, is what a GGUF's images mean.
  c.image_attention = c.n_embd == 1536 || c.n_embd == 2560 ? ImageAttention::None
                                                          : ImageAttention::SlidingLayers;
  c.image_row_token =
      static_cast<int32_t>(v.opt_int("tokenizer.ggml.padding_token_id", nullptr).value_or(0));
  c.n_expert = v.opt_int("expert_count", nullptr).value_or(0);
  c.n_expert_used = v.opt_int("expert_used_count", nullptr).value_or(0);
  if (c.n_expert > 0) c.n_ff_expert = v.req_int("expert_feed_forward_length", nullptr);
  if (auto n = v.opt_int("vocab_size", nullptr)) c.n_vocab = *n;
}

// transformers' Gemma4TextConfig: per_layer_config (when saved) gives each overridden layer its
// head_dim and kv heads; without it the global layers take global_head_dim and, with
// attention_k_eq_v, num_global_key_value_heads.
void read_hf(const ConfigView& v, ArchConfig& c) {
  read_hf_sliding_layers(v, c);
  const int64_t hd = v.req_int(nullptr, "head_dim");
  const int64_t kv = v.opt_int(nullptr, "num_key_value_heads").value_or(c.n_head);
  c.attn_k_eq_v = v.opt_bool(nullptr, "attention_k_eq_v").value_or(false);
  const int64_t hd_global = v.opt_int(nullptr, "global_head_dim").value_or(512);
  const auto kv_global = v.opt_int(nullptr, "num_global_key_value_heads");
  c.layer_head_dim.resize(static_cast<size_t>(c.n_layer));
  c.layer_n_head_kv.resize(c.layer_head_dim.size());
  const nlohmann::json* per_layer = v.hf_value("per_layer_config");
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const auto i = static_cast<size_t>(l);
    const bool global = !c.layer_sliding[i];
    c.layer_head_dim[i] = global ? hd_global : hd;
    c.layer_n_head_kv[i] = global && c.attn_k_eq_v && kv_global ? *kv_global : kv;
    if (per_layer == nullptr) continue;
    if (!per_layer->is_object()) v.invalid("per_layer_config", "expected an object");
    // Layers it does not name take the top-level sizes.
    c.layer_head_dim[i] = hd;
    c.layer_n_head_kv[i] = kv;
    auto it = per_layer->find(std::to_string(l));
    if (it == per_layer->end()) continue;
    const auto num = [&](const char* key, int64_t& out) {
      auto f = it->find(key);
      if (f == it->end()) return;
      if (!f->is_number_integer())
        v.invalid("per_layer_config/" + std::to_string(l) + "/" + key, "expected an integer");
      out = f->get<int64_t>();
    };
    num("head_dim", c.layer_head_dim[i]);
    num("num_key_value_heads", c.layer_n_head_kv[i]);
  }
  const int64_t ff = v.req_int(nullptr, "intermediate_size");
  const int64_t shared = v.opt_int(nullptr, "num_kv_shared_layers").value_or(0);
  share_kv(v, c, shared, "num_kv_shared_layers");
  // The double-wide MLP: twice the width on the layers that share another's KV rows.
  const bool wide = v.opt_bool(nullptr, "use_double_wide_mlp").value_or(false);
  c.layer_n_ff.resize(c.layer_head_dim.size());
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.layer_n_ff[static_cast<size_t>(l)] = wide && !c.holds_kv(l) ? 2 * ff : ff;
  const auto rope = [&](const char* type, const char* key) {
    const std::string path = std::string("rope_parameters/") + type + "/" + key;
    return v.opt_float(nullptr, path.c_str());
  };
  const auto theta = rope("full_attention", "rope_theta");
  const auto local = rope("sliding_attention", "rope_theta");
  if (!theta || !local) v.missing(nullptr, "rope_parameters/{full,sliding}_attention/rope_theta");
  c.rope_theta = static_cast<float>(*theta);
  c.rope_theta_local = static_cast<float>(*local);
  for (const char* type : {"full_attention", "sliding_attention"}) {
    const std::string path = std::string("rope_parameters/") + type + "/rope_type";
    const std::string kind = v.opt_string(nullptr, path.c_str()).value_or("default");
    const bool ok = kind == "default" || (kind == "proportional" && type[0] == 'f');
    if (!ok) v.invalid(path, "rope_type '" + kind + "' is not supported here");
    if (kind == "proportional" && rope(type, "factor").value_or(1.0) != 1.0)
      v.invalid(std::string("rope_parameters/") + type + "/factor", "only 1 is supported");
  }
  c.rope_partial_global =
      static_cast<float>(rope("full_attention", "partial_rotary_factor").value_or(1.0));
  if (!(c.rope_partial_global > 0 && c.rope_partial_global <= 1))
    v.invalid("rope_parameters/full_attention/partial_rotary_factor", "must be within (0, 1]");
  // transformers' default when the config omits it is 256 (E2B / E4B).
  c.n_embd_per_layer = v.opt_int(nullptr, "hidden_size_per_layer_input").value_or(256);
  if (c.n_embd_per_layer > 0 && v.opt_int(nullptr, "vocab_size_per_layer_input").value_or(0) !=
                                    v.req_int(nullptr, "vocab_size"))
    v.invalid("vocab_size_per_layer_input", "differs from vocab_size (not supported)");
  if (v.opt_bool(nullptr, "enable_moe_block").value_or(false)) {
    c.n_expert = v.req_int(nullptr, "num_experts");
    c.n_expert_used = v.req_int(nullptr, "top_k_experts");
    c.n_ff_expert = v.req_int(nullptr, "moe_intermediate_size");
  }
  // "vision": an image's rows attend to each other on the sliding layers (26B-A4B, 31B); null:
  // causal (E2B, E4B); "all" (every row both ways) is an encoder's.
  const auto bidir = v.hf_value("use_bidirectional_attention");
  const bool vision =
      bidir != nullptr && bidir->is_string() && bidir->get<std::string>() == "vision";
  if (bidir != nullptr && !bidir->is_null() && !vision)
    v.invalid("use_bidirectional_attention", "only null and \"vision\" are supported");
  c.image_attention = vision ? ImageAttention::SlidingLayers : ImageAttention::None;
  c.image_row_token = static_cast<int32_t>(v.opt_int(nullptr, "pad_token_id").value_or(0));
  const auto act = v.opt_string(nullptr, "hidden_activation").value_or("gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh") v.invalid("hidden_activation", "'" + act + "' is not supported");
  if (v.opt_bool(nullptr, "attention_bias").value_or(false))
    v.invalid("attention_bias", "attention biases are not supported");
  c.n_vocab = v.req_int(nullptr, "vocab_size");
}

}  // namespace

void configure_gemma4(const ConfigView& v, ArchConfig& c) {
  read_sizes(v, c);
  if (v.is_gguf()) {
    read_gguf(v, c);
  } else {
    read_hf(v, c);
  }
  const bool gguf = v.is_gguf();
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const auto i = static_cast<size_t>(l);
    if (c.layer_head_dim[i] <= 0 || c.layer_head_dim[i] > 1024 || c.layer_head_dim[i] % 2 != 0)
      v.invalid(gguf ? "attention.key_length" : "head_dim",
                "layer " + std::to_string(l) + ": " + std::to_string(c.layer_head_dim[i]) +
                    " must be even and within (0, 1024]");
    if (c.layer_n_head_kv[i] <= 0 || c.n_head % c.layer_n_head_kv[i] != 0)
      v.invalid(gguf ? "attention.head_count_kv" : "num_key_value_heads",
                "layer " + std::to_string(l) + ": " + std::to_string(c.layer_n_head_kv[i]) +
                    " kv heads do not divide the " + std::to_string(c.n_head) + " query heads");
    if (c.layer_n_ff[i] <= 0 || c.layer_n_ff[i] > (1 << 22))
      v.invalid(gguf ? "feed_forward_length" : "intermediate_size",
                "layer " + std::to_string(l) + ": " + std::to_string(c.layer_n_ff[i]) +
                    " is out of range");
  }
  // The sizes the per-layer-blind checks and buffers take: the first layer's, and the widest FFN.
  c.head_dim = c.layer_head_dim[0];
  c.n_head_kv = c.layer_n_head_kv[0];
  c.rotary_dim = c.head_dim;
  c.n_ff = *std::max_element(c.layer_n_ff.begin(), c.layer_n_ff.end());
  c.rope_pairing = RopePairing::NeoX;
  c.attn_scale = 1.0f;  // q and k are RMS-normed: no 1/sqrt(head_dim)
  c.sandwich_norms = true;
  c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.ffn_act = FfnActivation::GeluTanh;
  c.qk_norm = QkNorm::PerHead;
  c.attn_v_norm = true;
  c.tied_embeddings = true;
  c.norm_plus_one = false;  // Gemma 4's norms scale by w itself, in both formats
  c.layer_output_scale = true;
  if (c.image_row_token < 0 || (c.n_vocab > 0 && c.image_row_token >= c.n_vocab))
    v.invalid(gguf ? "tokenizer.ggml.padding_token_id" : "pad_token_id",
              std::to_string(c.image_row_token) + " is outside the vocabulary");
  if (c.n_embd_per_layer < 0 || c.n_embd_per_layer > 65536)
    v.invalid(gguf ? "embedding_length_per_layer_input" : "hidden_size_per_layer_input",
              std::to_string(c.n_embd_per_layer) + " is out of range");
  if (c.n_expert > 0) {
    c.layer_moe.assign(c.layer_moe.size(), 1);
    c.router = RouterScoring::SoftmaxTopk;
    c.norm_topk_prob = true;
    c.moe_dense_beside = true;
  }
}

}  // namespace ts
