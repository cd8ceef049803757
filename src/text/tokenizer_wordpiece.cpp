// WordPiece encoding of one raw-text fragment (HF tokenizers' WordPiece model).
#include "core/utf8.h"
#include "text/tokenizer.h"

namespace ts {

void Tokenizer::encode_wordpiece(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<size_t> starts;  // byte offset of each character of a word, then its end
  std::string piece;
  for (const std::string& word : bert_words(text, spec_.bert)) {
    starts.clear();
    for (size_t pos = 0; pos < word.size(); pos += utf8_valid_prefix(word, pos))
      starts.push_back(pos);
    if (static_cast<int64_t>(starts.size()) > spec_.max_word_chars) {
      out.push_back(spec_.unk);
      continue;
    }
    starts.push_back(word.size());
    const size_t first = out.size();
    // Longest piece first from each position; a position where none matches makes the whole
    // word unknown.
    for (size_t i = 0; i + 1 < starts.size();) {
      size_t j = starts.size() - 1;
      for (; j > i; --j) {
        piece.assign(i == 0 ? "" : spec_.continuing_prefix);
        piece.append(word, starts[i], starts[j] - starts[i]);
        if (const auto id = find_token(piece)) {
          out.push_back(*id);
          break;
        }
      }
      if (j == i) {
        out.resize(first);
        out.push_back(spec_.unk);
        break;
      }
      i = j;
    }
  }
}

}  // namespace ts
