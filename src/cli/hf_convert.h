// An HF directory written as the GGUF llama.cpp's converter writes (model/convert_model.h for the
// weights and the architecture's keys, text/convert_vocab.h for the tokenizer's): to a file for
// `convert`, or to an anonymous in-memory file that `quantize` reads as its source.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "quant/dtype.h"

namespace ts {
class GgufFile;
}

namespace ts::cli {

// The output types of convert_hf_to_gguf.py's --outtype that convert writes.
struct ConvertType {
  const char* name;
  DType dtype;        // of the weight matrices; vectors, norms and routers stay f32
  int64_t file_type;  // general.file_type (llama_ftype)
};
const std::vector<ConvertType>& convert_types();
std::string convert_type_names();

struct ConvertSummary {
  int64_t tensors = 0;
  uint64_t bytes = 0;
  std::string warning;  // the tokenizer's pre-tokenizer is not the one written (convert_vocab.h)
};

// Writes the GGUF of `hf_dir` to `out` (removed again if writing fails): its text model, or with
// `mmproj` its vision tower and projector (model/convert_mmproj.h). `progress(done, total)` counts
// elements of tensors written.
ConvertSummary write_converted(const std::string& hf_dir, const std::string& out,
                               const ConvertType& type, bool mmproj,
                               const std::function<void(uint64_t, uint64_t)>& progress);

// The GGUF of `hf_dir` with its weights in their own float type (bf16 or f16 when the checkpoint
// is that, else f32), in memory: the same bytes `convert` writes for that type.
std::unique_ptr<GgufFile> open_converted(const std::string& hf_dir);

}  // namespace ts::cli
