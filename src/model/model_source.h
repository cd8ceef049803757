// ModelSource: a model opened from a GGUF file or a Hugging Face directory, seen the same way by
// everything above it: configuration values by key and tensors by their stored name.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "model/arch_config.h"
#include "quant/dtype.h"

namespace ts {

class GgufFile;
class HfDirectory;

// Where a tensor's bytes are: a range of one mapped file.
struct TensorRef {
  std::string name;  // as stored in the file, for messages
  DType dtype = DType::F32;
  std::vector<uint64_t> dims;  // GGML order: dims[0] is the row length
  const MappedFile* file = nullptr;
  uint64_t offset = 0;
  uint64_t nbytes = 0;

  const uint8_t* data() const { return file->data() + offset; }
  int64_t cols() const { return static_cast<int64_t>(dims[0]); }
  int64_t rows() const;  // product of every dimension after the first
  std::string shape_string() const;
};

class ModelSource {
 public:
  // Opens `path`: a .gguf file, or a directory holding config.json.
  static std::unique_ptr<ModelSource> open(const std::string& path);
  ~ModelSource();

  SourceKind kind() const { return kind_; }
  const std::string& path() const { return path_; }
  const GgufFile* gguf() const { return gguf_.get(); }
  const HfDirectory* hf() const { return hf_.get(); }

  std::optional<TensorRef> find(std::string_view name) const;
  std::vector<TensorRef> all_tensors() const;
  // The architecture string: GGUF general.architecture, or HF architectures[0].
  std::string architecture() const;
  // HF: the object of config.json that holds the text decoder's values, "" for the top level. A
  // multimodal checkpoint that a family reads as its text decoder (is_multimodal_class, with a
  // text_config) is seen as that decoder: "text_config", and find() takes the text model's names
  // ("model.layers.0...") to where the checkpoint keeps them ("model.language_model.layers.0...",
  // or the older "language_model.model.layers.0..."), other names as they are. A bare decoder's
  // checkpoint (names without "model.", as Qwen3-Embedding ships) is found under the same "model."
  // names.
  const std::string& text_config_root() const { return text_root_; }

 private:
  ModelSource() = default;
  void find_text_decoder();
  SourceKind kind_ = SourceKind::Gguf;
  std::string path_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<HfDirectory> hf_;
  std::string text_root_;      // HF: "text_config" for a multimodal checkpoint
  std::string text_prefix_;    // what replaces "model." in its tensor names
  bool bare_decoder_ = false;  // HF: names without "model." (text_prefix_ "")
};

}  // namespace ts
