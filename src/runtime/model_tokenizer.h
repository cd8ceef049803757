// The tokenizer of an opened model: from the GGUF metadata, or from the HF directory's files.
#pragma once

#include <string>

#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ts {

struct ModelSpec;

Tokenizer load_tokenizer(const ModelSpec& spec);
// The chat format: `explicit_name` when given, else the one the model's template is written for,
// else the family's own; an error naming the choices otherwise.
ChatTemplate model_chat_template(const ModelSpec& spec, const std::string& explicit_name);

}  // namespace ts
