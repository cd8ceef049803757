// SentencePiece-style encoding of one raw-text fragment.
#include "core/error.h"
#include "text/merge_queue.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// SentencePiece's remove_extra_whitespaces: no leading or trailing spaces, runs become one.
std::string collapse_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

void Tokenizer::encode_spm(std::string_view fragment, bool after_special,
                           std::vector<int32_t>& out) const {
  std::string text =
      spec_.remove_extra_whitespaces ? collapse_spaces(fragment) : std::string(fragment);
  if (text.empty()) return;
  // The dummy prefix makes the first word look like every other word ("▁Hello"); llama.cpp and
  // HF add it to every text fragment that follows a special token or starts the text.
  if (spec_.add_space_prefix && after_special) text.insert(text.begin(), ' ');
  std::string escaped;
  escaped.reserve(text.size() * 3);
  for (char c : text) {
    if (c == ' ') {
      escaped += kSpaceMarker;
    } else {
      escaped.push_back(c);
    }
  }

  const auto cost = [&](std::string_view a, std::string_view b) -> std::optional<double> {
    if (!spec_.merges.empty()) {
      // Merges listed by rank (Gemma 4's GGUF, whose scores are placeholders): the pair's rank.
      std::string key;
      key.reserve(a.size() + b.size() + 1);
      key.append(a).push_back('\0');
      key.append(b);
      const auto it = merge_rank_.find(key);
      if (it == merge_rank_.end()) return std::nullopt;
      return static_cast<double>(it->second);
    }
    std::string joined;
    joined.reserve(a.size() + b.size());
    joined.append(a).append(b);
    const auto it = by_text_.find(joined);
    if (it == by_text_.end()) return std::nullopt;
    return -static_cast<double>(spec_.scores[it->second]);
  };
  for (std::string_view piece : merge_pieces(escaped, cost)) {
    if (const auto id = find_token(piece)) {
      out.push_back(*id);
    } else {
      push_bytes(piece, out);
    }
  }
}

}  // namespace ts
