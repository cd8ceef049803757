// `turbospark convert`: a Hugging Face directory as the GGUF that llama.cpp's convert_hf_to_gguf.py
// writes for it: its architecture name, the metadata keys its model class writes, the tensors
// renamed, permuted, shifted and stacked as that class does. The tokenizer's keys are text/'s
// (convert_vocab.h); this half says which rules the family's class applies to them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "formats/gguf.h"
#include "formats/vocab_rules.h"
#include "quant/dtype.h"

namespace ts {

class ModelSource;

// Metadata in the order it is set; setting a key again replaces its value in place (as the
// converter's writer does when a class sets a key its base class already set).
class GgufKvList {
 public:
  void set(const std::string& key, GgufValue v);
  const GgufValue* find(const std::string& key) const;
  const std::vector<std::pair<std::string, GgufValue>>& items() const { return kv_; }

 private:
  std::vector<std::pair<std::string, GgufValue>> kv_;
};

struct ConvertTensor {
  ConvertTensor(std::string n, std::vector<uint64_t> d, bool f32, std::function<void(float*)> v)
      : name(std::move(n)), dims(std::move(d)), keep_f32(f32), values(std::move(v)) {}

  std::string name;            // GGUF name
  std::vector<uint64_t> dims;  // GGML order: dims[0] is the row
  // The converter keeps it f32 whatever the output type: vectors, norms, the routers, the
  // convolution taps and every tensor not named *.weight.
  bool keep_f32 = false;
  bool f16_always = false;       // f16 whatever the output type (Gemma 3's mmproj projection)
  bool f16_in_f16_file = false;  // f16 in an f16 file, else f32 (an mmproj's patch embedding)
  std::function<void(float* out)> values;  // writes the elements, rows end to end
  // A tensor kept in the checkpoint's own type whatever the output type (gpt-oss's MXFP4
  // experts): its bytes instead of values.
  DType raw_dtype = DType::F32;
  std::function<void(uint8_t* out)> raw_bytes;
  uint64_t elements() const;
};

struct ConvertedModel {
  std::string arch;  // general.architecture
  // general.* and the architecture's keys, without tokenizer.*; general.file_type is a
  // placeholder the writer sets.
  GgufKvList kv;
  std::vector<ConvertTensor> tensors;  // in the converter's order (test_convert checks it)
  VocabRules vocab;
  // general.file_type of f32 / f16 / bf16 outputs when the checkpoint's experts are MXFP4 (38,
  // llama.cpp's MOSTLY_MXFP4_MOE); -1 otherwise.
  int64_t float_file_type = -1;
};

// The model of the HF directory `source` (ModelSource::open of a directory). Unsupported: a class
// convert does not handle, a tensor with no GGUF name (both named); Model: a missing expert, a
// missing configuration value.
ConvertedModel convert_hf_model(const ModelSource& source);

// general.size_label as the converter computes it from the tensors' shapes ("598K", "8x65K").
std::string gguf_size_label(const std::vector<ConvertTensor>& tensors);
// general.name from the directory's name, as the converter makes one when no model card names it.
std::string gguf_model_name(const std::string& dir);

}  // namespace ts
