#include "text/detokenizer.h"

#include <algorithm>

#include "core/utf8.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Whether bytes[pos..] (not a complete valid sequence) is the start of one, missing only bytes.
bool could_complete(const std::string& bytes, size_t pos) {
  const auto lead = static_cast<uint8_t>(bytes[pos]);
  const size_t want = static_cast<size_t>(utf8_sequence_length(lead));
  const size_t have = bytes.size() - pos;
  if (want == 0 || have >= want) return false;
  for (size_t i = 1; i < have; ++i)
    if ((static_cast<uint8_t>(bytes[pos + i]) & 0xC0) != 0x80) return false;
  if (have < 2) return true;
  // The second byte's range rules out overlong forms, surrogates and code points > U+10FFFF.
  const auto b1 = static_cast<uint8_t>(bytes[pos + 1]);
  return !((lead == 0xE0 && b1 < 0xA0) || (lead == 0xED && b1 > 0x9F) ||
           (lead == 0xF0 && b1 < 0x90) || (lead == 0xF4 && b1 > 0x8F));
}

}  // namespace

size_t take_complete_utf8(const std::string& bytes, std::string& out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t n = utf8_valid_prefix(bytes, pos);
    if (n > 0) {
      out.append(bytes, pos, n);
      pos += n;
    } else if (could_complete(bytes, pos)) {
      break;
    } else {
      out += kReplacement;
      ++pos;
    }
  }
  return pos;
}

TextStream::TextStream(const Tokenizer& tokenizer, bool render_special, std::vector<int32_t> shown)
    : tok_(tokenizer), render_special_(render_special), shown_(std::move(shown)) {
  std::sort(shown_.begin(), shown_.end());
}

std::string TextStream::push(int32_t id) {
  pending_ += tok_.token_to_piece(
      id, render_special_ || std::binary_search(shown_.begin(), shown_.end(), id));
  std::string out;
  pending_.erase(0, take_complete_utf8(pending_, out));
  return out;
}

std::string TextStream::flush() {
  std::string out = pending_.empty() ? "" : kReplacement;
  pending_.clear();
  return out;
}

}  // namespace ts
