#include "text/byte_unicode.h"

#include <array>

#include "core/utf8.h"

namespace ts {
namespace {

bool maps_to_itself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

struct Tables {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, 0x144> cp_to_byte{};  // the alphabet's largest code point is U+0143
  Tables() {
    cp_to_byte.fill(-1);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      byte_to_cp[b] = maps_to_itself(b) ? static_cast<uint32_t>(b) : next++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string bytes_to_byte_level(std::string_view raw) {
  const Tables& t = tables();
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) utf8_append(out, t.byte_to_cp[static_cast<uint8_t>(c)]);
  return out;
}

std::string byte_level_to_bytes(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = utf8_valid_prefix(text, pos);
    if (n == 0) {  // not UTF-8 at all: pass the byte through
      out.push_back(text[pos++]);
      continue;
    }
    const uint32_t cp = utf8_decode_at(text, pos, n);
    if (cp < t.cp_to_byte.size() && t.cp_to_byte[cp] >= 0) {
      out.push_back(static_cast<char>(t.cp_to_byte[cp]));
    } else {
      out.append(text.substr(pos, n));
    }
    pos += n;
  }
  return out;
}

}  // namespace ts
