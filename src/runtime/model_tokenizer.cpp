#include "runtime/model_tokenizer.h"

#include "formats/gguf.h"
#include "model/model_spec.h"

namespace ts {

Tokenizer load_tokenizer(const ModelSpec& spec) {
  if (spec.source->gguf() != nullptr) return Tokenizer::from_gguf(*spec.source->gguf());
  return Tokenizer::from_hf_dir(spec.source->path());
}

}  // namespace ts
