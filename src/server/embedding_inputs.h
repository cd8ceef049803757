// The inputs of an embedding request as token lists, read the same way for each dialect: a
// string, a list of strings, a list of token ids or a list of lists of token ids (OpenAI's
// `input`; Ollama's `input` and the legacy `prompt` take strings). Texts go through
// embedding_tokens() (the BOS / EOS the tokenizer adds); ids are taken as given. Every refusal is
// an Input error naming the field and the input ("'input[2]' is an empty string").
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace ts::server {

// More inputs than this in one request are refused (OpenAI's own limit).
constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingInputRules {
  const char* field = "input";
  bool token_ids = true;  // lists of token ids are accepted (OpenAI), not only text
  int64_t truncate = -1;  // > 0: longer inputs keep their first this many tokens (Ollama)
};

std::vector<std::vector<int32_t>> embedding_inputs(const Tokenizer& tok,
                                                   const nlohmann::json& value,
                                                   const EmbeddingInputRules& rules);

}  // namespace ts::server
