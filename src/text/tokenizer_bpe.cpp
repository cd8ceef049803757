// Byte-level BPE encoding of one raw-text fragment.
#include "core/error.h"
#include "text/byte_unicode.h"
#include "text/merge_queue.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"

namespace ts {

void Tokenizer::encode_bpe(std::string_view fragment, std::vector<int32_t>& out) const {
  for (std::string_view word : pre_->split(fragment))
    encode_bpe_word(bytes_to_byte_level(word), out);
}

void Tokenizer::encode_bpe_word(const std::string& word, std::vector<int32_t>& out) const {
  if (spec_.ignore_merges) {
    if (const auto id = find_token(word)) {
      out.push_back(*id);
      return;
    }
  }
  const auto cost = [&](std::string_view a, std::string_view b) -> std::optional<double> {
    std::string key;
    key.reserve(a.size() + b.size() + 1);
    key.append(a).push_back('\0');
    key.append(b);
    const auto it = merge_rank_.find(key);
    if (it == merge_rank_.end()) return std::nullopt;
    return static_cast<double>(it->second);
  };
  for (std::string_view piece : merge_pieces(word, cost)) {
    if (const auto id = find_token(piece)) {
      out.push_back(*id);
      continue;
    }
    // A merge produced a piece the vocabulary lacks (a broken file) or a base character is
    // missing: fall back to the single characters, each of which is one byte.
    for (std::string_view ch : merge_pieces(
             piece, [](std::string_view, std::string_view) { return std::optional<double>(); })) {
      if (const auto id = find_token(ch)) {
        out.push_back(*id);
      } else if (spec_.unk >= 0) {
        out.push_back(spec_.unk);
      } else {
        fail(ErrorKind::Input, spec_.source + ": no token for the byte-level character '" +
                                   std::string(ch) + "' and no unknown token");
      }
    }
  }
}

}  // namespace ts
