// Error messages quote names and keys straight from model files; a hostile file could put line
// breaks or terminal escapes in them. Messages leave the parsers through one_line().
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace ts {

// `s` with every control byte written as \xNN, so that it prints as one inert line.
inline std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char esc[5];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      out += esc;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace ts
