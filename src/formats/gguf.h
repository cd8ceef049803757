// GGUF reader (versions 2 and 3, little-endian). Every count, length, dimension and offset is
// checked against the file size with checked arithmetic before anything is allocated; tensor data
// is reached through read-only mmaps and never copied here. A split model (llama.cpp's
// `PREFIX-00001-of-0000N.gguf`, told by its `split.*` metadata) opens from any of its parts as one
// GgufFile: the metadata of the first part, the tensors of all, one mapping per part.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "quant/dtype.h"

namespace ts {

enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* gguf_type_name(GgufType t);

struct GgufArray;

struct GgufValue {
  GgufType type = GgufType::U8;
  int64_t i = 0;                   // every integer type (u64 above 2^63 is refused) and bool
  double f = 0;                    // f32, f64
  std::string s;                   // string
  std::shared_ptr<GgufArray> arr;  // array
};

// Arrays keep one typed vector so a 262k-entry vocabulary costs its strings, not 262k values.
struct GgufArray {
  GgufType elem = GgufType::U8;
  std::vector<int64_t> ints;         // integer and bool elements
  std::vector<double> floats;        // f32 / f64 elements
  std::vector<std::string> strings;  // string elements
  std::vector<GgufValue> nested;     // array elements (each holds its own GgufArray)
  uint64_t size() const;
};

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> dims;  // GGML order: dims[0] is the contiguous (row) dimension
  DType dtype = DType::F32;
  uint64_t offset = 0;  // absolute byte offset in the file of its part
  uint64_t nbytes = 0;
  uint32_t part = 0;  // which part of a split model holds it (0 for a single file)
  uint64_t elements() const;
};

class GgufFile {
 public:
  // Opens `path`; when its metadata says it is one part of a split model, opens every part (named
  // as llama.cpp's gguf-split names them) and checks that they form the model.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Opens `path` alone, whatever its split metadata says.
  static std::unique_ptr<GgufFile> open_single(const std::string& path);

  uint32_t version() const { return version_; }
  // Alignment and data section of the first part (each part has its own).
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  // The first part (the one holding the metadata), or part `k` of a split model.
  const MappedFile& file(size_t k = 0) const { return *files_[k]; }
  size_t part_count() const { return files_.size(); }
  const std::string& path() const { return files_[0]->path(); }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  // Typed getters: nullopt when the key is absent; an error naming the key when the type is wrong.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;  // accepts integers too
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  const GgufArray* get_array(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(std::string_view name) const;
  const uint8_t* tensor_data(const GgufTensor& t) const {
    return files_[t.part]->data() + t.offset;
  }

 private:
  GgufFile() = default;
  void join_parts(const std::string& opened_path);
  std::vector<std::unique_ptr<MappedFile>> files_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;

  friend class GgufParser;
};

}  // namespace ts
