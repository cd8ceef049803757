// BERT's basic tokenizer: HF tokenizers' BertNormalizer (drop control characters, space out CJK
// ideographs, strip accents, lowercase, as the tokenizer's options say) then its BertPreTokenizer
// (split at whitespace, each punctuation character a word of its own). WordPiece then cuts each
// word into vocabulary pieces (Tokenizer, tokenizer_wordpiece.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ts {

struct BertNormalizerOptions {
  bool clean_text = true;     // drop NUL, U+FFFD and Cc/Cf/Co (not tab, CR, LF); whitespace -> ' '
  bool chinese_chars = true;  // a CJK ideograph is a word of its own
  bool strip_accents = true;  // NFD without nonspacing marks
  bool lowercase = true;
};

// The words of valid UTF-8 `text`, in order, each as UTF-8.
std::vector<std::string> bert_words(std::string_view text, const BertNormalizerOptions& o);

}  // namespace ts
