// Unigram encoding of one raw-text fragment: the precompiled charsmap normalises it, the
// whitespace rules turn it into the strings the search cuts (spaces spelled U+2581), and each
// string's segmentation is the one whose pieces' log-probabilities (scores) sum highest.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/utf8.h"
#include "text/tokenizer.h"
#include "text/unicode_props.h"

namespace ts {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581
// sentencepiece scores a character no piece covers as the lowest piece score less this (HF
// tokenizers and llama.cpp use the same penalty), so an unknown is the last resort.
constexpr double kUnknownPenalty = 10.0;

bool is_piece(TokenType t) {
  return t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused;
}

// sentencepiece's whitespace rules on normalised text, as llama.cpp's UGM session applies them:
// a marker before the first word (add_dummy_prefix), and either every space a marker or
// (remove_extra_whitespaces) one marker before each word, the first included, and none at the
// end. XLM-R sets both, where sentencepiece agrees.
std::string spm_spaces(std::string_view text, bool prefix, bool collapse) {
  std::string out;
  out.reserve(text.size());
  bool in_word = false;
  bool prefixed = false;
  for (char c : text) {
    if (c != ' ') {
      if (!in_word && ((prefix && !prefixed) || collapse)) {
        out += kSpaceMarker;
        prefixed = true;
      }
      in_word = true;
      out.push_back(c);
    } else {
      in_word = false;
      if (!collapse) out += kSpaceMarker;
    }
  }
  return out;
}

// The unicode-whitespace-delimited words of text (HF's WhitespaceSplit), or text whole.
std::vector<std::string_view> whitespace_words(std::string_view text, bool split) {
  if (!split) return {text};
  std::vector<std::string_view> words;
  size_t start = std::string_view::npos;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8_char_length(text, pos);
    const bool space = is_unicode_whitespace(utf8_decode_at(text, pos, len));
    if (space && start != std::string_view::npos) {
      words.push_back(text.substr(start, pos - start));
      start = std::string_view::npos;
    } else if (!space && start == std::string_view::npos) {
      start = pos;
    }
    pos += len;
  }
  if (start != std::string_view::npos) words.push_back(text.substr(start));
  return words;
}

std::string_view strip_whitespace(std::string_view text, bool left, bool right) {
  while (left && !text.empty()) {
    const size_t len = utf8_char_length(text, 0);
    if (!is_unicode_whitespace(utf8_decode_at(text, 0, len))) break;
    text.remove_prefix(len);
  }
  while (right && !text.empty()) {
    size_t pos = text.size() - 1;
    while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) --pos;
    if (!is_unicode_whitespace(utf8_decode_at(text, pos, text.size() - pos))) break;
    text.remove_suffix(text.size() - pos);
  }
  return text;
}

// A tokenizer.json pipeline's strings: the Strip / Replace normalisers, then the pre-tokenizers
// (WhitespaceSplit, Metaspace: spaces to markers, one marker prepended, a word at each marker).
std::vector<std::string> hf_words(std::string_view normalized, const UnigramHfSteps& h) {
  std::string text(strip_whitespace(normalized, h.strip_left, h.strip_right));
  if (h.collapse_spaces) {
    std::string collapsed;
    for (char c : text)
      if (c != ' ' || collapsed.empty() || collapsed.back() != ' ') collapsed.push_back(c);
    text = std::move(collapsed);
  }
  std::vector<std::string> out;
  for (std::string_view word : whitespace_words(text, h.whitespace_split)) {
    std::string escaped;
    for (char c : word) {
      if (c == ' ') {
        escaped += kSpaceMarker;
      } else {
        escaped.push_back(c);
      }
    }
    if (escaped.empty()) continue;
    if (h.prepend && !escaped.starts_with(kSpaceMarker)) escaped.insert(0, kSpaceMarker);
    if (!h.split) {
      out.push_back(std::move(escaped));
      continue;
    }
    size_t start = 0;
    for (size_t at = escaped.find(kSpaceMarker, 1); at != std::string::npos;
         at = escaped.find(kSpaceMarker, at + 1)) {
      out.push_back(escaped.substr(start, at - start));
      start = at;
    }
    out.push_back(escaped.substr(start));
  }
  return out;
}

}  // namespace

void Tokenizer::index_unigram() {
  charsmap_ = PrecompiledCharsmap(spec_.charsmap, spec_.source + ": precompiled_charsmap");
  double lowest = std::numeric_limits<double>::max();
  for (size_t i = 0; i < spec_.tokens.size(); ++i) {
    if (!is_piece(spec_.types[i])) continue;
    unigram_longest_ = std::max(unigram_longest_, spec_.tokens[i].size());
    if (spec_.types[i] == TokenType::Normal) lowest = std::min<double>(lowest, spec_.scores[i]);
  }
  unigram_unk_score_ =
      (lowest == std::numeric_limits<double>::max() ? 0.0 : lowest) - kUnknownPenalty;
}

void Tokenizer::encode_unigram(std::string_view fragment, std::vector<int32_t>& out) const {
  const std::string normalized = charsmap_.normalize(fragment);
  if (spec_.hf_steps) {
    for (const std::string& word : hf_words(normalized, *spec_.hf_steps))
      unigram_viterbi(word, out);
  } else {
    unigram_viterbi(spm_spaces(normalized, spec_.add_space_prefix, spec_.remove_extra_whitespaces),
                    out);
  }
}

// best[e]: the highest-scoring cut of text[0, e) and its last piece. Every piece that starts
// where a cut ends extends it; a character no single piece covers extends it as the unknown
// token. Scores are summed in double, as sentencepiece's and HF's searches do; ties keep the
// first cut found (shorter last piece), as llama.cpp's does.
void Tokenizer::unigram_viterbi(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  struct Best {
    int32_t id;
    size_t from;
    double score;
  };
  const size_t n = text.size();
  std::vector<Best> best(n + 1, {spec_.unk, 0, -std::numeric_limits<double>::infinity()});
  best[0].score = 0;
  for (size_t pos = 0; pos < n;) {
    const size_t first = utf8_char_length(text, pos);
    bool covered = false;
    for (size_t end = pos + first; end <= n && end - pos <= unigram_longest_;
         end += utf8_char_length(text, end)) {
      const auto it = by_text_.find(text.substr(pos, end - pos));
      if (it != by_text_.end() && is_piece(spec_.types[it->second])) {
        const int32_t id = it->second;
        covered |= end - pos == first;
        // A user-defined piece scores 0, above every log-probability, as in llama.cpp.
        const double score = best[pos].score + (spec_.types[id] == TokenType::UserDefined
                                                    ? 0.0
                                                    : static_cast<double>(spec_.scores[id]));
        if (score > best[end].score) best[end] = {id, pos, score};
      }
      if (end == n) break;
    }
    if (!covered) {
      const double score = best[pos].score + unigram_unk_score_;
      if (score > best[pos + first].score) best[pos + first] = {spec_.unk, pos, score};
    }
    pos += first;
  }
  // Back from the end; a run of unknown characters is one unknown token, as in sentencepiece.
  const size_t start = out.size();
  bool after_unknown = false;
  for (size_t end = n; end > 0; end = best[end].from) {
    const bool unknown = best[end].id == spec_.unk;
    if (!(unknown && after_unknown)) out.push_back(best[end].id);
    after_unknown = unknown;
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
}

}  // namespace ts
