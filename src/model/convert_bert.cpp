// BertModel, XLMRobertaModel and NomicBertModel: encoders (attention.causal false, the
// sentence-transformers pooling), their tensors by their own names (BERT's embeddings,
// encoder.layer.N; nomic-ai's emb_ln, encoder.layers.N), and a WordPiece vocabulary in the
// converter's phantom-space form under the pre-tokenizer name "bert-bge" (XLM-R: its
// SentencePiece Unigram as "t5").
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <span>

#include "core/error.h"
#include "model/convert_family.h"
#include "model/model_source.h"

namespace ts {
namespace {

using NamePair = std::pair<const char*, const char*>;

// {HF part after "encoder.layer.N.", GGUF part after "blk.N."}
constexpr NamePair kBertLayerParts[] = {
    {"attention.self.query.", "attn_q."},
    {"attention.self.key.", "attn_k."},
    {"attention.self.value.", "attn_v."},
    {"attention.output.dense.", "attn_output."},
    {"attention.output.LayerNorm.", "attn_output_norm."},
    {"intermediate.dense.", "ffn_up."},
    {"output.dense.", "ffn_down."},
    {"output.LayerNorm.", "layer_output_norm."},
};

constexpr NamePair kBertEmbeddings[] = {
    {"embeddings.word_embeddings.", "token_embd."},
    {"embeddings.position_embeddings.", "position_embd."},
    {"embeddings.token_type_embeddings.", "token_types."},
    {"embeddings.LayerNorm.", "token_embd_norm."},
};

// nomic-ai's layout (after "encoder.layers.N."): q, k and v stacked; fc11 up, fc12 the gate.
constexpr NamePair kNomicLayerParts[] = {
    {"attn.Wqkv.", "attn_qkv."},      {"attn.out_proj.", "attn_output."},
    {"norm1.", "attn_output_norm."},  {"mlp.fc11.", "ffn_up."},
    {"mlp.fc12.", "ffn_gate."},       {"mlp.fc2.", "ffn_down."},
    {"norm2.", "layer_output_norm."},
};

constexpr NamePair kNomicEmbeddings[] = {
    {"embeddings.word_embeddings.", "token_embd."},
    {"embeddings.token_type_embeddings.", "token_types."},
    {"emb_ln.", "token_embd_norm."},
};

// One class's names: its embeddings' and, after `layers` + "N.", its layers' parts.
struct EncoderNames {
  std::span<const NamePair> embeddings;
  const char* layers;
  std::span<const NamePair> layer_parts;
  const char* arch;
};

// The tensor's name as the converter reads it: no "bert." prefix, gamma / beta as weight / bias.
std::string normalised(std::string name) {
  if (name.starts_with("bert.")) name.erase(0, 5);
  if (name.ends_with(".gamma")) name.replace(name.size() - 6, 6, ".weight");
  if (name.ends_with(".beta")) name.replace(name.size() - 5, 5, ".bias");
  return name;
}

// The GGUF tensor of `t` by `names` (BertModel.filter_tensors first: its prefix, gamma / beta and
// the parts that are not the embedding model's dropped).
bool encoder_tensor(const EncoderNames& names, const TensorRef& t, const ModelSource& src,
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
  for (const auto& [hf, gguf] : names.embeddings)
    if (name.starts_with(hf)) return add(gguf + name.substr(std::strlen(hf)));
  const std::string layers = names.layers;
  if (name.starts_with(layers)) {
    char* end = nullptr;
    const long layer = std::strtol(name.c_str() + layers.size(), &end, 10);
    if (end != nullptr && *end == '.') {
      const std::string part = end + 1;
      for (const auto& [hf, gguf] : names.layer_parts)
        if (part.starts_with(hf))
          return add("blk." + std::to_string(layer) + "." + gguf + part.substr(std::strlen(hf)));
    }
  }
  fail(ErrorKind::Unsupported, src.path() + ": tensor '" + t.name + "' has no GGUF name in " +
                                   names.arch +
                                   " (a part of the model that convert does not know)");
}

// nomic-ai's switches, each at the one value llama.cpp's converter converts (it asserts them).
void check_nomic_switches(const Hparams& hp) {
  const auto need = [&](const char* key, const nlohmann::json& want) {
    const nlohmann::json* v = hp.find({key});
    const nlohmann::json got = v != nullptr ? *v : nlohmann::json(nullptr);
    if (got != want)
      fail(ErrorKind::Unsupported, hp.where() + ": " + key + " is " + got.dump() +
                                       ", which convert does not handle (" + want.dump() + ")");
  };
  if (const nlohmann::json* moe = hp.get("moe_every_n_layers"); moe && *moe != 0)
    fail(ErrorKind::Unsupported,
         hp.where() + ": nomic-bert-moe (moe_every_n_layers) is not converted");
  need("activation_function", "swiglu");
  need("causal", false);
  for (const char* bias :
       {"qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias", "prenorm", "rotary_emb_interleaved"})
    need(bias, false);
  need("rotary_emb_fraction", 1.0);
  need("rotary_emb_scale_base", nullptr);
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
  return encoder_tensor({kBertEmbeddings, "encoder.layer.", kBertLayerParts, "bert"}, t, src, out);
}

bool nomic_bert_tensor(const TensorRef& t, int64_t, const Hparams&, const ModelSource& src,
                       std::vector<ConvertTensor>& out) {
  return encoder_tensor({kNomicEmbeddings, "encoder.layers.", kNomicLayerParts, "nomic-bert"}, t,
                        src, out);
}

// XLM-R's position ids start at pad_token_id + 1: the converter drops the table's rows before
// (its _xlmroberta_tokenizer_init / modify_tensors) and lowers max_position_embeddings by as
// many; without a pad_token_id it keeps both.
int64_t xlm_roberta_position_offset(const Hparams& hp) {
  const nlohmann::json* pad = hp.get("pad_token_id");
  return pad != nullptr && pad->is_number_integer() ? pad->get<int64_t>() + 1 : 0;
}

void xlm_roberta_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w) {
  if (const int64_t offset = xlm_roberta_position_offset(hp); offset > 0)
    w.u32("context_length", hp.req_int("max_position_embeddings") - offset);
  bert_keys(hp, source, w);
}

bool xlm_roberta_tensor(const TensorRef& t, int64_t layer, const Hparams& hp,
                        const ModelSource& src, std::vector<ConvertTensor>& out) {
  // XLMRobertaModel.filter_tensors: a "roberta." prefix (bge-reranker-v2-m3) as none.
  TensorRef named = t;
  if (named.name.starts_with("roberta.")) named.name.erase(0, 8);
  const auto offset = static_cast<uint64_t>(xlm_roberta_position_offset(hp));
  if (named.name != "embeddings.position_embeddings.weight" || offset == 0)
    return bert_tensor(named, layer, hp, src, out);
  if (t.dims.size() != 2 || t.dims[1] <= offset)
    fail(ErrorKind::Model,
         src.path() + ": tensor '" + t.name + "' " + t.shape_string() +
             " has no rows after the first pad_token_id + 1 = " + std::to_string(offset));
  const uint64_t cols = t.dims[0];
  out.emplace_back("position_embd.weight", std::vector<uint64_t>{cols, t.dims[1] - offset},
                   converter_keeps_f32("position_embd.weight", 2), [t, cols, offset](float* v) {
                     std::vector<float> all(cols * t.dims[1]);
                     read_f32(t, all.data());
                     std::copy(all.begin() + static_cast<std::ptrdiff_t>(cols * offset), all.end(),
                               v);
                   });
  return true;
}

void xlm_roberta_vocab(const Hparams& hp, VocabRules& rules) {
  bert_vocab(hp, rules);
  rules.wordpiece = false;
  rules.xlm_roberta = true;
}

void nomic_bert_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w) {
  if (hp.get("n_embd") == nullptr)
    fail(ErrorKind::Unsupported,
         hp.where() +
             ": a NomicBertModel in transformers' layout (no n_embd) is not converted; "
             "llama.cpp's converter reads nomic-ai's (n_embd, attn.Wqkv, mlp.fc11)");
  check_nomic_switches(hp);
  // The converter's context: v1 / v1.5 state 8192 positions but were trained on 2048 (and the
  // MoE v2 2048 on 512); other pairs it refuses.
  const int64_t npos = hp.req_int("n_positions");
  const nlohmann::json* mtp_value = hp.get("max_trained_positions");
  const int64_t mtp =
      mtp_value != nullptr && mtp_value->is_number_integer() ? mtp_value->get<int64_t>() : 2048;
  if (mtp != 2048 || (npos != 8192 && npos != 2048))
    fail(ErrorKind::Unsupported, hp.where() + ": n_positions " + std::to_string(npos) +
                                     " with max_trained_positions " + std::to_string(mtp) +
                                     " is not a nomic-embed-text model convert knows");
  w.u32("context_length", npos == 8192 ? 2048 : 512);
  bert_keys(hp, source, w);
}

void bert_vocab(const Hparams& hp, VocabRules& rules) {
  rules.wordpiece = true;
  const nlohmann::json* types = hp.get("type_vocab_size");
  rules.token_type_count =
      types != nullptr && types->is_number_integer() ? types->get<int64_t>() : 1;
}

}  // namespace ts
