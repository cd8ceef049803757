#include "core/error.h"

namespace ts {

std::string one_line(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out.push_back('\\');
      out.push_back('x');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage:
    case ErrorKind::Input:
      return 1;
    case ErrorKind::Model:
    case ErrorKind::Unsupported:
    case ErrorKind::Budget:
      return 2;
    case ErrorKind::Runtime:
      return 3;
  }
  return 3;
}

}  // namespace ts
