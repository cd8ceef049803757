// nomic-bert: nomic-embed-text v1 / v1.5 (llama.cpp's "nomic-bert" GGUF, and NomicBertModel
// directories in nomic-ai's own layout or transformers'). BERT's post-LayerNorm encoder with
// rotary q / k instead of a position table, a SwiGLU FFN and no projection biases. nomic-ai's
// config.json names its values its own way (n_embd, n_head, rotary_emb_base, ...); a directory
// saved by transformers names them as BERT does, and both are read.
#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/config_view.h"
#include "model/family.h"

namespace ts {
namespace {

// The first of `keys` config.json has (nomic-ai's name before transformers').
std::optional<int64_t> hf_int(const ConfigView& v, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (auto n = v.opt_int(nullptr, k)) return n;
  return std::nullopt;
}

int64_t req_hf_int(const ConfigView& v, const char* nomic, const char* transformers) {
  if (auto n = hf_int(v, {nomic, transformers})) return *n;
  v.missing(nullptr, nomic);
}

// nomic-ai's switches for what its code can build and this family is not: each must hold its
// nomic-embed-text value (llama.cpp's converter checks the same ones).
void check_nomic_switches(const ConfigView& v) {
  const auto flag = [&](const char* key, bool want) {
    if (auto b = v.opt_bool(nullptr, key); b && *b != want)
      v.invalid(key, std::string(*b ? "true" : "false") + " is not supported (" +
                         (want ? "true" : "false") + ")");
  };
  flag("causal", false);
  flag("prenorm", false);
  flag("qkv_proj_bias", false);
  flag("mlp_fc1_bias", false);
  flag("mlp_fc2_bias", false);
  flag("rotary_emb_interleaved", false);
  flag("use_rms_norm", false);
  flag("parallel_block", false);
  if (auto n = v.opt_int(nullptr, "moe_every_n_layers"); n && *n != 0)
    v.invalid("moe_every_n_layers", "nomic-bert-moe (nomic-embed-text-v2-moe) is not supported");
  if (auto act = v.opt_string(nullptr, "activation_function"); act && *act != "swiglu")
    v.invalid("activation_function", "'" + *act + "' is not supported (swiglu)");
  if (auto f = v.opt_float(nullptr, "rotary_emb_fraction"); f && *f != 1.0)
    v.invalid("rotary_emb_fraction", std::to_string(*f) + ": partial rotary is not supported");
  for (const char* key : {"rotary_emb_scale_base", "rotary_scaling_factor"})
    if (const nlohmann::json* j = v.hf_value(key); j != nullptr && !j->is_null())
      v.invalid(key, "rotary scaling is not supported (null)");
}

}  // namespace

void configure_nomic_bert(const ConfigView& v, ArchConfig& c) {
  c.source = v.kind();
  c.stack = LayerStack::Encoder;
  c.encoder.positions = EncoderPositions::Rotary;
  c.encoder.ffn = EncoderFfn::SwiGlu;
  c.encoder.biases = false;
  if (v.is_gguf()) {
    c.n_layer = v.req_int("block_count", nullptr);
    c.n_embd = v.req_int("embedding_length", nullptr);
    c.n_head = v.req_int("attention.head_count", nullptr);
    c.n_ff = v.req_int("feed_forward_length", nullptr);
    c.encoder.n_positions = v.req_int("context_length", nullptr);
    c.encoder.norm_eps = static_cast<float>(v.req_float("attention.layer_norm_epsilon", nullptr));
    c.rope_theta = static_cast<float>(v.req_float("rope.freq_base", nullptr));
    if (v.opt_bool("attention.causal", nullptr).value_or(false))
      v.invalid("attention.causal", "a causal nomic-bert is not supported");
    if (auto type = v.opt_string("rope.scaling.type", nullptr); type && *type != "none")
      v.invalid("rope.scaling.type", "'" + *type + "' is not supported (none)");
    if (auto n = v.opt_int("vocab_size", nullptr)) c.n_vocab = *n;
  } else {
    check_nomic_switches(v);
    if (auto act = v.opt_string(nullptr, "hidden_act"); act && *act != "silu")
      v.invalid("hidden_act", "'" + *act + "' is not supported (silu)");
    if (auto type = v.opt_string(nullptr, "rope_parameters/rope_type"); type && *type != "default")
      v.invalid("rope_parameters.rope_type", "'" + *type + "' is not supported (default)");
    c.n_layer = req_hf_int(v, "n_layer", "num_hidden_layers");
    c.n_embd = req_hf_int(v, "n_embd", "hidden_size");
    c.n_head = req_hf_int(v, "n_head", "num_attention_heads");
    c.n_ff = req_hf_int(v, "n_inner", "intermediate_size");
    // nomic-embed-text v1 / v1.5 state 8192 positions but were trained on 2048, which is what
    // llama.cpp's converter writes as their context.
    c.encoder.n_positions = req_hf_int(v, "max_trained_positions", "max_position_embeddings");
    c.n_vocab = v.req_int(nullptr, "vocab_size");
    double eps = 1e-12;  // both configurations' default
    for (const char* key : {"layer_norm_epsilon", "layer_norm_eps"})
      if (auto e = v.opt_float(nullptr, key)) {
        eps = *e;
        break;
      }
    c.encoder.norm_eps = static_cast<float>(eps);
    // transformers' NomicBertConfig defaults the base to 1000, as nomic-ai's models have it.
    c.rope_theta = static_cast<float>(
        v.opt_float(nullptr, "rotary_emb_base")
            .value_or(v.opt_float(nullptr, "rope_parameters/rope_theta").value_or(1000.0)));
  }
  if (c.n_layer <= 0 || c.n_layer > 4096)
    v.invalid("block count", std::to_string(c.n_layer) + " is out of range [1, 4096]");
  if (c.n_head <= 0 || c.n_embd <= 0 || c.n_embd % c.n_head != 0 || (c.n_embd / c.n_head) % 2)
    v.invalid("head count", std::to_string(c.n_head) + " does not divide the hidden size " +
                                std::to_string(c.n_embd) + " into heads of an even width");
  if (c.n_ff <= 0 || c.encoder.n_positions <= 0)
    v.invalid("feed-forward length / positions", "must be positive");
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    v.invalid("rope base", std::to_string(c.rope_theta) + " is not a positive number");
  c.n_head_kv = c.n_head;
  c.head_dim = c.n_embd / c.n_head;
  c.rotary_dim = c.head_dim;
  c.rope_theta_local = c.rope_theta;
  c.rope_pairing = RopePairing::NeoX;
  c.ctx_train = c.encoder.n_positions;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.layer_mixer.assign(static_cast<size_t>(c.n_layer), MixerKind::Attention);
  c.layer_sliding.assign(static_cast<size_t>(c.n_layer), 0);
  c.layer_moe.assign(static_cast<size_t>(c.n_layer), 0);
}

}  // namespace ts
