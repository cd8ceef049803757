// GGUF writer (version 3, or 2 on request): metadata of every type including nested arrays, tensors
// at aligned offsets. It writes what it is told without judging it, so that tests can build
// malformed files with it; a caller that wants a valid file must not repeat keys or tensor names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "quant/dtype.h"

namespace ts {

GgufValue gguf_int(GgufType type, int64_t v);   // any integer type, or bool
GgufValue gguf_float(GgufType type, double v);  // f32 or f64
GgufValue gguf_string(std::string s);
GgufValue gguf_array(GgufArray a);

// Where each section of bytes() starts, for tests that cut or patch a file.
struct GgufLayout {
  std::vector<uint64_t> kv_offsets;  // start of each key/value (its key length)
  uint64_t tensor_infos_begin = 0;
  std::vector<uint64_t> tensor_info_offsets;  // start of each tensor info (its name length)
  uint64_t data_begin = 0;                    // the aligned start of the tensor data section
  uint64_t end = 0;
};

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  void add_kv(std::string key, GgufValue value);
  // Lays tensor data out at multiples of `alignment` and records it as general.alignment (call
  // once, before the file relies on it).
  void set_alignment(uint32_t alignment);
  // A tensor with its bytes, which must be exactly dims x dtype long (GGML order: dims[0] is the
  // row); placed at the next aligned offset of the data section.
  void add_tensor(std::string name, DType dtype, std::vector<uint64_t> dims, const void* data,
                  uint64_t nbytes);
  // A tensor info written exactly as given (raw type id, dims, offset relative to the data
  // section), with no data and no checks: for malformed files.
  void add_raw_tensor_info(std::string name, uint32_t ggml_type, std::vector<uint64_t> dims,
                           uint64_t offset);

  std::vector<uint8_t> bytes(GgufLayout* layout = nullptr) const;
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> dims;
    uint64_t offset;            // relative to the data section
    std::vector<uint8_t> data;  // empty for raw infos
  };

  uint32_t version_;
  uint64_t alignment_ = 32;
  uint64_t data_size_ = 0;  // bytes of the data section so far, padded to alignment_
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace ts
