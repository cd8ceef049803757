#include "text/bert_basic_tokenizer.h"

#include "core/utf8.h"
#include "text/unicode_props.h"

namespace ts {
namespace {

std::u32string code_points(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8_valid_prefix(text, pos);
    out.push_back(utf8_decode_at(text, pos, len));
    pos += len;
  }
  return out;
}

// The normaliser's steps in HF's order: clean, CJK spacing, accents, lowercase.
std::u32string normalize(std::string_view text, const BertNormalizerOptions& o) {
  std::u32string cps;
  for (const char32_t cp : code_points(text)) {
    const bool layout = cp == U'\t' || cp == U'\n' || cp == U'\r';
    if (o.clean_text && (cp == 0 || cp == 0xFFFD || (!layout && is_unicode_other(cp)))) continue;
    if (o.clean_text && is_unicode_whitespace(cp)) {
      cps.push_back(U' ');
    } else if (o.chinese_chars && is_cjk_ideograph(cp)) {
      cps.push_back(U' ');
      cps.push_back(cp);
      cps.push_back(U' ');
    } else {
      cps.push_back(cp);
    }
  }
  if (o.strip_accents) {
    std::u32string stripped;
    stripped.reserve(cps.size());
    for (const char32_t cp : cps) append_without_marks(cp, stripped);
    cps.swap(stripped);
  }
  if (o.lowercase) {
    std::u32string lower;
    lower.reserve(cps.size());
    for (const char32_t cp : cps) append_lowercase(cp, lower);
    cps.swap(lower);
  }
  return cps;
}

bool is_bert_punctuation(char32_t cp) {
  const bool ascii = (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) ||
                     (cp >= 0x5B && cp <= 0x60) || (cp >= 0x7B && cp <= 0x7E);
  return ascii || is_unicode_punctuation(cp);
}

}  // namespace

std::vector<std::string> bert_words(std::string_view text, const BertNormalizerOptions& o) {
  std::vector<std::string> words;
  std::string word;
  const auto end_word = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (const char32_t cp : normalize(text, o)) {
    if (is_unicode_whitespace(cp)) {
      end_word();
    } else if (is_bert_punctuation(cp)) {
      end_word();
      utf8_append(word, cp);
      end_word();
    } else {
      utf8_append(word, cp);
    }
  }
  end_word();
  return words;
}

}  // namespace ts
