// The tokenizer of an opened model: from the GGUF metadata, or from the HF directory's files.
#pragma once

#include <string>

#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ts {

class ModelSource;
struct ModelSpec;

Tokenizer load_tokenizer(const ModelSource& source);
Tokenizer load_tokenizer(const ModelSpec& spec);
// The chat template: `explicit_name` (a built-in format or a .jinja file) when given, else the
// model's own (run as Jinja, with `tok`'s BOS / EOS texts), else the family's format; an error
// naming the choices otherwise.
ChatTemplate model_chat_template(const ModelSpec& spec, const Tokenizer& tok,
                                 const std::string& explicit_name);

}  // namespace ts
