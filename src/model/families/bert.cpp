// bert: BERT-style sentence-embedding encoders (BertModel and XLMRobertaModel, as
// sentence-transformers ships them, and llama.cpp's "bert" GGUF of either): LayerStack::Encoder.
// Absolute positions only; the GELU by hidden_act (GGUF does not say: BERT's exact GELU).
// XLM-R's layers are BERT's; its position ids start after the padding token (pad_token_id + 1),
// the rows before are never read: an HF checkpoint's table skips them (position_offset), as
// llama.cpp's converter chops them off the GGUF's and lowers its context_length.
#include <cmath>

#include "model/config_view.h"
#include "model/family.h"

namespace ts {

void configure_bert(const ConfigView& v, ArchConfig& c) {
  c.source = v.kind();
  c.stack = LayerStack::Encoder;
  c.n_layer = v.req_int("block_count", "num_hidden_layers");
  c.n_embd = v.req_int("embedding_length", "hidden_size");
  c.n_head = v.req_int("attention.head_count", "num_attention_heads");
  c.n_head_kv = c.n_head;
  c.n_ff = v.req_int("feed_forward_length", "intermediate_size");
  c.encoder.n_positions = v.req_int("context_length", "max_position_embeddings");
  c.ctx_train = c.encoder.n_positions;
  c.encoder.norm_eps =
      static_cast<float>(v.req_float("attention.layer_norm_epsilon", "layer_norm_eps"));
  if (c.n_layer <= 0 || c.n_layer > 4096)
    v.invalid("block count", std::to_string(c.n_layer) + " is out of range [1, 4096]");
  if (c.n_head <= 0 || c.n_embd <= 0 || c.n_embd % c.n_head != 0)
    v.invalid("head count", std::to_string(c.n_head) + " does not divide the hidden size " +
                                std::to_string(c.n_embd));
  if (c.n_ff <= 0 || c.encoder.n_positions <= 0)
    v.invalid("feed-forward length / positions", "must be positive");
  c.head_dim = c.n_embd / c.n_head;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.layer_mixer.assign(static_cast<size_t>(c.n_layer), MixerKind::Attention);
  c.layer_sliding.assign(static_cast<size_t>(c.n_layer), 0);
  c.layer_moe.assign(static_cast<size_t>(c.n_layer), 0);
  if (v.is_gguf()) {
    if (v.opt_bool("attention.causal", nullptr).value_or(false))
      v.invalid("attention.causal", "a causal BERT is not supported");
    if (auto n = v.opt_int("vocab_size", nullptr)) c.n_vocab = *n;
    return;
  }
  c.n_vocab = v.req_int(nullptr, "vocab_size");
  if (v.opt_string(nullptr, "model_type").value_or("") == "xlm-roberta") {
    c.encoder.position_offset = v.req_int(nullptr, "pad_token_id") + 1;
    if (c.encoder.position_offset <= 0 || c.encoder.position_offset >= c.encoder.n_positions)
      v.invalid("pad_token_id", std::to_string(c.encoder.position_offset - 1) +
                                    " leaves no positions of " +
                                    std::to_string(c.encoder.n_positions));
    c.encoder.n_positions -= c.encoder.position_offset;
    c.ctx_train = c.encoder.n_positions;
  }
  const std::string pos = v.opt_string(nullptr, "position_embedding_type").value_or("absolute");
  if (pos != "absolute")
    v.invalid("position_embedding_type", "'" + pos + "' is not supported (absolute)");
  if (v.opt_bool(nullptr, "is_decoder").value_or(false))
    v.invalid("is_decoder", "a BERT decoder is not supported");
  const std::string act = v.opt_string(nullptr, "hidden_act").value_or("gelu");
  if (act != "gelu" && act != "gelu_new" && act != "gelu_pytorch_tanh")
    v.invalid("hidden_act", "'" + act + "' is not supported (gelu, gelu_new, gelu_pytorch_tanh)");
  c.encoder.gelu_tanh = act != "gelu";
}

}  // namespace ts
