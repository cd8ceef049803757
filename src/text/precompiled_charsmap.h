// SentencePiece's precompiled normalisation rules (NormalizerSpec.precompiled_charsmap; HF
// tokenizers' "Precompiled" normaliser; GGUF tokenizer.ggml.precompiled_charsmap): a u32 byte
// count, a double-array trie of that many bytes keyed by the UTF-8 of the text a rule rewrites,
// then the NUL-terminated replacements its leaves point into. Normalising is a longest-prefix
// walk from each position, as sentencepiece's normalizer and llama.cpp's UGM tokenizer do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

class PrecompiledCharsmap {
 public:
  PrecompiledCharsmap() = default;  // no rules: text passes unchanged
  // Checks the layout (the header's count against the blob, every leaf's replacement inside it):
  // a Model error naming `source` otherwise.
  PrecompiledCharsmap(std::string_view blob, std::string source);

  bool empty() const { return trie_.empty(); }

  // The rule for the longest prefix of text[pos..] the trie holds: its replacement and how many
  // bytes it rewrites (0: no rule).
  struct Match {
    std::string_view replacement;
    size_t consumed = 0;
  };
  Match longest_match(std::string_view text, size_t pos) const;

  // text with every rule applied (unmatched characters copied); `text` is valid UTF-8.
  std::string normalize(std::string_view text) const;

 private:
  void check_leaves() const;

  std::vector<uint32_t> trie_;
  std::string replacements_;
  std::string source_;
};

}  // namespace ts
