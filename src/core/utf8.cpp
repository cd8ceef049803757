#include "core/utf8.h"

namespace ts {

int utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;  // continuation byte, or the overlong leads C0/C1
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

size_t utf8_valid_prefix(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  const auto b0 = static_cast<uint8_t>(text[pos]);
  const int n = utf8_sequence_length(b0);
  if (n == 0 || pos + n > text.size()) return 0;
  for (int i = 1; i < n; ++i)
    if ((static_cast<uint8_t>(text[pos + i]) & 0xC0) != 0x80) return 0;
  if (n >= 3) {
    // The second byte's range rules out overlong forms, surrogates and code points > U+10FFFF.
    const auto b1 = static_cast<uint8_t>(text[pos + 1]);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;
    if (b0 == 0xED && b1 > 0x9F) return 0;
    if (b0 == 0xF0 && b1 < 0x90) return 0;
    if (b0 == 0xF4 && b1 > 0x8F) return 0;
  }
  return static_cast<size_t>(n);
}

size_t utf8_char_length(std::string_view text, size_t pos) {
  const size_t n = utf8_valid_prefix(text, pos);
  return n > 0 ? n : 1;
}

size_t utf8_first_invalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = utf8_valid_prefix(text, pos);
    if (n == 0) return pos;
    pos += n;
  }
  return std::string_view::npos;
}

uint32_t utf8_decode_at(std::string_view text, size_t pos, size_t len) {
  const auto b = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(text[pos + i]));
  };
  switch (len) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace ts
