// Splits text into the words that byte-level BPE merges within, by a sequence of regular
// expressions applied one after another (as Hugging Face's Sequence of Split pre-tokenizers with
// the "isolated" behaviour does): each expression cuts every current piece into its matches and
// the text between them. Matching is PCRE2 in UTF + Unicode-property mode, so \p{L}, \p{N},
// \p{P} and \s use real Unicode categories.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

class PreTokenizer {
 public:
  // `what` names the source (file and key) in error messages.
  PreTokenizer(const std::vector<std::string>& patterns, const std::string& what);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // `text` must be valid UTF-8. The pieces view into `text` and concatenate back to it.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Compiled;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// The regex sequence llama.cpp uses for a GGUF `tokenizer.ggml.pre` name; fails (Unsupported)
// naming the key for a name we do not know. An empty name means the key is absent: llama.cpp
// then uses its "default" sequence, and so do we.
std::vector<std::string> pre_tokenizer_patterns(const std::string& pre_name,
                                                const std::string& what);

// Whether llama.cpp encodes a whole pre-tokenized word as one token when it is in the vocabulary,
// before trying merges (Hugging Face `ignore_merges`), for this pre-tokenizer name.
bool pre_tokenizer_ignores_merges(const std::string& pre_name);

}  // namespace ts
