// Translates a tokenizer.json `pre_tokenizer` of a byte-level BPE model into the regex sequence
// our PreTokenizer runs. Supported: Split (Regex or String pattern, "Isolated" behaviour),
// Digits, ByteLevel (with or without its GPT-2 regex) and Sequences of these; anything else is
// refused by name, since a silently different split gives silently different tokens.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace ts {

std::vector<std::string> hf_pretokenizer_patterns(const nlohmann::json& pre,
                                                  const std::string& path);

}  // namespace ts
