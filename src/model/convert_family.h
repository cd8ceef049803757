// The pieces of `convert` (convert_model.h) shared by its files: the configuration as the
// converter reads it, the writer of an architecture's keys, and the table of model classes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "model/arch_config.h"
#include "model/convert_model.h"

namespace ts {

class ModelSource;
struct TensorRef;

// config.json with its text_config's values over the top level's, and rope_parameters completed
// from the older top-level keys, as the converter's TextModel reads them.
class Hparams {
 public:
  Hparams(const nlohmann::json& config, const std::string& where);

  // The first of `keys` present; nullptr when none is, or the first present one is null.
  const nlohmann::json* find(std::initializer_list<const char*> keys) const;
  const nlohmann::json* get(const char* key) const { return find({key}); }
  int64_t req_int(const char* key) const { return req_int({key}); }
  // The first of `keys` present, an integer; a Model error naming the first key when none is.
  int64_t req_int(std::initializer_list<const char*> keys) const;
  const nlohmann::json& rope() const { return rope_; }
  // rope_parameters' full_attention object when there is one, else rope_parameters itself.
  const nlohmann::json& rope_full() const;
  const std::string& where() const { return where_; }

 private:
  nlohmann::json h_;
  nlohmann::json rope_;
  std::string where_;
};

// Writes keys under "<arch>." (or as given for general.* and tokenizer.*), with the converter's
// value types.
class KeyWriter {
 public:
  KeyWriter(GgufKvList& kv, std::string arch) : kv_(kv), arch_(std::move(arch)) {}
  void u32(const std::string& key, int64_t v);
  void f32(const std::string& key, double v);
  void boolean(const std::string& key, bool v);
  void str(const std::string& key, std::string v);
  void i32_array(const std::string& key, const std::vector<int64_t>& v);
  void bool_array(const std::string& key, const std::vector<int64_t>& v);
  void f32_array(const std::string& key, const std::vector<float>& v);
  // The value of `hf` (when present and not null) as u32 / f32.
  void u32_from(const std::string& key, const nlohmann::json* hf);
  void f32_from(const std::string& key, const nlohmann::json* hf);
  const GgufValue* find(const std::string& key) const;

 private:
  std::string full(const std::string& key) const;
  GgufKvList& kv_;
  std::string arch_;
};

// TextModel.set_gguf_parameters: the keys every class writes from the common config names.
void write_text_model_keys(const Hparams& hp, int64_t block_count, KeyWriter& w);
// general.name as gguf-py's metadata heuristics make it without a model card.
void write_model_name(const ModelSource& source, KeyWriter& w);
// sentence-transformers' pooling of the directory (modules.json), as <arch>.pooling_type.
void write_pooling_type(const ModelSource& source, KeyWriter& w);

// What the converter does to a family's tensors beyond renaming them.
enum ConvertFix : uint32_t {
  kPermuteQK = 1u << 0,    // llama: q/k rows from rotate-half pairs to interleaved pairs
  kNormPlusOne = 1u << 1,  // Gemma: *norm.weight stored as 1 + w
  kTrimEmbd = 1u << 2,     // Gemma: token_embd cut to the tokenizer's vocabulary
  // The tokenizer (VocabRules):
  kNoSpacePrefix = 1u << 4,      // Gemma: add_space_prefix = false
  kAddPrefixSpaceKey = 1u << 5,  // llama: tokenizer_config's add_prefix_space as the key
};

// A special id the class sets from the added tokens ({type, token text}).
struct SpecialToken {
  const char* type;
  const char* text;
};

struct ConvertFamily {
  const char* hf_class;
  const char* arch;
  Family family;  // whose tensor names (tensor_names.h) the class uses
  // The class's own keys after TextModel's.
  void (*keys)(const Hparams& hp, const ModelSource& source, KeyWriter& w);
  uint32_t fixes = 0;
  const char* bpe_pre = "";  // tokenizer.ggml.pre when the tokenizer is byte-level BPE
  // Tensors the class makes its own way from one HF tensor of layer `layer` (gpt-oss's fused
  // experts); false for a tensor renamed by its role.
  bool (*own_tensor)(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource& src,
                     std::vector<ConvertTensor>& out) = nullptr;
  // MTP layers after the decoder's (GLM-4.5: num_nextn_predict_layers) are counted as blocks.
  const char* nextn_key = nullptr;
  const SpecialToken* special = nullptr;  // ends at an entry of type nullptr
  // Tensors the class makes before the checkpoint's (rope_freqs).
  void (*leading_tensors)(const Hparams& hp, std::vector<ConvertTensor>& out) = nullptr;
  // The class's own tokenizer rules beside those above (Gemma 4's).
  void (*vocab_rules)(const Hparams& hp, VocabRules& rules) = nullptr;
};

// The converter's rule: vectors, norms, routers, convolution taps, position and token-type tables
// and tensors not named *.weight stay f32 whatever the output type.
bool converter_keeps_f32(const std::string& gguf_name, size_t n_dims);
// A tensor's elements as f32 (f32, f16 or bf16 in the checkpoint).
void read_f32(const TensorRef& t, float* out);

// Experts stored transposed, [E][in][width] (GGML dims [width, in, E]): the GGUF tensor whose
// row r of expert e is column first + r * step, `rows` of them (gpt-oss's, Qwen3-VL-MoE's).
ConvertTensor transposed_experts(const TensorRef& t, const std::string& name, int64_t first,
                                 int64_t step, uint64_t rows);
// LlamaModel's rope_freqs tensor under llama3 rope scaling.
void llama3_rope_freqs(const Hparams& hp, std::vector<ConvertTensor>& out);
// Gemma3Model's keys, which Gemma 4's class extends.
void gemma3_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w);
void gemma4_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w);
void gemma4_rope_freqs(const Hparams& hp, std::vector<ConvertTensor>& out);
void gemma4_vocab(const Hparams& hp, VocabRules& rules);
void bert_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w);
bool bert_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource& src,
                 std::vector<ConvertTensor>& out);
void bert_vocab(const Hparams& hp, VocabRules& rules);
void xlm_roberta_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w);
bool xlm_roberta_tensor(const TensorRef& t, int64_t layer, const Hparams& hp,
                        const ModelSource& src, std::vector<ConvertTensor>& out);
void xlm_roberta_vocab(const Hparams& hp, VocabRules& rules);
void nomic_bert_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w);
bool nomic_bert_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource& src,
                       std::vector<ConvertTensor>& out);

// Qwen2MoeModel's keys, which Qwen3-Next's class extends.
void qwen2moe_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w);
void qwen3next_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w);
bool qwen3next_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource& src,
                      std::vector<ConvertTensor>& out);
void qwen35_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w);
bool qwen35_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource& src,
                   std::vector<ConvertTensor>& out);
void deepseek2_keys(const Hparams& hp, const ModelSource& source, KeyWriter& w);
bool deepseek2_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource& src,
                      std::vector<ConvertTensor>& out);
bool qwen3vlmoe_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource& src,
                       std::vector<ConvertTensor>& out);
bool gpt_oss_tensor(const TensorRef& t, int64_t layer, const Hparams& hp, const ModelSource& src,
                    std::vector<ConvertTensor>& out);

// The ConvertFamily's tensors of `source` (convert_tensors.cpp); `n_vocab`: the rows of the
// embedding table to keep (kTrimEmbd).
std::vector<ConvertTensor> convert_tensors(const ConvertFamily& f, const Hparams& hp,
                                           const ModelSource& source, int64_t block_count,
                                           int64_t n_vocab);

// nullptr when convert does not handle `hf_class`.
const ConvertFamily* find_convert_family(const std::string& hf_class);
std::string convert_family_names();

}  // namespace ts
