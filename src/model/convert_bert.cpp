// BertModel: an encoder (attention.causal false, the sentence-transformers pooling), its tensors
// by BERT's own names (embeddings, encoder.layer.N), and a WordPiece vocabulary in the
// converter's phantom-space form under the pre-tokenizer name "bert-bge".
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/convert_family.h"
#include "model/model_source.h"

namespace ts {
namespace {

// {HF part after "encoder.layer.N.", GGUF part after "blk.N."}
constexpr std::pair<const char*, const char*> kLayerParts[] = {
    {"attention.self.query.", "attn_q."},
    {"attention.self.key.", "attn_k."},
    {"attention.self.value.", "attn_v."},
    {"attention.output.dense.", "attn_output."},
    {"attention.output.LayerNorm.", "attn_output_norm."},
    {"intermediate.dense.", "ffn_up."},
    {"output.dense.", "ffn_down."},
    {"output.LayerNorm.", "layer_output_norm."},
};

constexpr std::pair<const char*, const char*> kEmbeddings[] = {
    {"embeddings.word_embeddings.", "token_embd."},
    {"embeddings.position_embeddings.", "position_embd."},
    {"embeddings.token_type_embeddings.", "token_types."},
    {"embeddings.LayerNorm.", "token_embd_norm."},
};

// The tensor's name as the converter reads it: no "bert." prefix, gamma / beta as weight / bias.
std::string normalised(std::string name) {
  if (name.starts_with("bert.")) name.erase(0, 5);
  if (name.ends_with(".gamma")) name.replace(name.size() - 6, 6, ".weight");
  if (name.ends_with(".beta")) name.replace(name.size() - 5, 5, ".bias");
  return name;
}

}  // namespace

void bert_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w) {
  w.boolean("attention.causal", false);
  write_pooling_type(source, w);
  // AutoConfig's placeholder labels (LABEL_0, LABEL_1) are no classifier.
  if (const nlohmann::json* labels = hp.get("id2label");
      labels != nullptr && labels->is_object() && !labels->empty() &&
      !(labels->size() == 2 && labels->value("0", "") == "LABEL_0"))
    fail(ErrorKind::Unsupported,
         hp.where() + ": a BERT classifier (id2label) is not converted, only the encoder");
}

bool bert_tensor(const TensorRef& t, int64_t, const Hparams&, const ModelSource& src,
                 std::vector<ConvertTensor>& out) {
  const std::string name = normalised(t.name);
  // The pooler and the pre-training heads are not the embedding model's.
  if (name == "embeddings.position_ids" || name.starts_with("pooler.") || name.starts_with("cls."))
    return true;
  const auto add = [&](const std::string& gguf) {
    out.emplace_back(gguf, t.dims, converter_keeps_f32(gguf, t.dims.size()),
                     [t](float* v) { read_f32(t, v); });
    return true;
  };
  for (const auto& [hf, gguf] : kEmbeddings)
    if (name.starts_with(hf)) return add(gguf + name.substr(std::strlen(hf)));
  const std::string layers = "encoder.layer.";
  if (name.starts_with(layers)) {
    char* end = nullptr;
    const long layer = std::strtol(name.c_str() + layers.size(), &end, 10);
    if (end != nullptr && *end == '.') {
      const std::string part = end + 1;
      for (const auto& [hf, gguf] : kLayerParts)
        if (part.starts_with(hf))
          return add("blk." + std::to_string(layer) + "." + gguf + part.substr(std::strlen(hf)));
    }
  }
  fail(ErrorKind::Unsupported, src.path() + ": tensor '" + t.name +
                                   "' has no GGUF name in bert (a part of BertModel that convert "
                                   "does not know)");
}

void bert_vocab(const Hparams& hp, VocabRules& rules) {
  rules.wordpiece = true;
  const nlohmann::json* types = hp.get("type_vocab_size");
  rules.token_type_count =
      types != nullptr && types->is_number_integer() ? types->get<int64_t>() : 1;
}

}  // namespace ts
