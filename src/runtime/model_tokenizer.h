// The tokenizer of an opened model: from the GGUF metadata, or from the HF directory's files.
#pragma once

#include "text/tokenizer.h"

namespace ts {

struct ModelSpec;

Tokenizer load_tokenizer(const ModelSpec& spec);

}  // namespace ts
