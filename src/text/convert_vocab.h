// The tokenizer half of `turbospark convert`: an HF directory's tokenizer as the tokenizer.* keys
// llama.cpp's converter writes (its _set_vocab_sentencepiece / _set_vocab_gpt2 and gguf-py's
// SpecialVocab): the vocabulary, its types and scores or merges, the special ids, the add_*
// flags and the chat template.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "formats/gguf.h"
#include "formats/vocab_rules.h"

namespace ts {

using GgufKeyValues = std::vector<std::pair<std::string, GgufValue>>;

// A SentencePiece tokenizer.model when there is one, else a byte-level BPE tokenizer.json. A Model
// error when the directory has neither; Unsupported when tokenizer.json is not byte-level BPE or
// the class names no pre-tokenizer. `warning`: set when tokenizer.json's pre-tokenizer splits a
// test text unlike the one the class names (rules.bpe_pre), which is written all the same.
GgufKeyValues convert_vocab(const std::string& dir, const VocabRules& rules,
                            std::string* warning = nullptr);

// gguf-py's SpecialVocab over `dir`: merges (when load_merges), special ids (those under n_vocab
// when it is positive), add_* flags, the chat template and normalizer flags, in its order. `extra`
// are the class's own {type, token text} ids, set when the files did not set them.
GgufKeyValues special_vocab_keys(const std::string& dir, bool load_merges, int64_t n_vocab,
                                 const std::vector<std::pair<std::string, std::string>>& extra);

// The converter's guess that an added token is a control token though not marked special.
bool token_looks_special(const std::string& text);

}  // namespace ts
