// A tokenizer.json whose model is a Unigram (transformers' conversion of a SentencePiece unigram
// model: XLM-R, T5): its [piece, score] vocabulary and unk_id, and the normaliser and
// pre-tokenizer steps transformers writes for it (Precompiled, Strip, Replace(" {2,}"),
// WhitespaceSplit, Metaspace). Anything else is refused by name: a silently different pipeline
// gives silently different tokens.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "text/tokenizer.h"

namespace ts {

TokenizerSpec hf_unigram_spec(const nlohmann::json& j, const std::string& path);

}  // namespace ts
