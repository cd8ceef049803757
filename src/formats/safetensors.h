// Safetensors reader and Hugging Face model directory (config.json + model.safetensors or a
// sharded model.safetensors.index.json). Headers are validated like GGUF headers: known dtype,
// shape x dtype size == byte range, ranges inside the file, no overlaps.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "quant/dtype.h"

namespace ts {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<uint64_t> dims;  // GGML order (reversed from the file's row-major shape)
  uint64_t offset = 0;         // absolute byte offset in the file
  uint64_t nbytes = 0;
};

class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);

  const MappedFile& file() const { return *file_; }
  const std::string& path() const { return file_->path(); }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* tensor(std::string_view name) const;
  const uint8_t* tensor_data(const SafetensorsTensor& t) const { return file_->data() + t.offset; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  friend class SafetensorsParser;
  std::unique_ptr<MappedFile> file_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// A Hugging Face model directory. Tensor names are unique across shards (checked). FP8
// block-quantised weights are read as their dequantised float32 values (fp8_blocks.h).
class HfDirectory {
 public:
  static std::unique_ptr<HfDirectory> open(const std::string& dir);
  ~HfDirectory();

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return *config_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }

  struct Found {
    const SafetensorsFile* file;
    const SafetensorsTensor* tensor;
  };
  // {nullptr, nullptr} when no shard holds `name`.
  Found find(std::string_view name) const;

 private:
  HfDirectory() = default;
  void add_shard(const std::string& path);
  void open_sharded(const std::string& index_path);
  // FP8 block-quantised weights (fp8_blocks.h) found by their float32 values from here on.
  void dequantise_fp8();

  std::string dir_;
  std::unique_ptr<nlohmann::json> config_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, Found, std::less<>> index_;
  std::unique_ptr<SafetensorsFile> fp8_;  // the dequantised FP8 weights, when there are any
};

}  // namespace ts
