#include "server/image_parts.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/json_fields.h"

namespace ts::server {
namespace {

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

std::string base64_decode(std::string_view s, const std::string& field) {
  while (!s.empty() && s.back() == '=') s.remove_suffix(1);
  if (s.size() % 4 == 1) bad(field, "is not valid base64 (its length)");
  std::string out;
  out.reserve(s.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = sextet(c);
    if (v < 0) bad(field, "is not valid base64 (a character outside its alphabet)");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string image_part_bytes(const nlohmann::json& part, const std::string& field,
                             std::string* fetch_url) {
  auto it = part.find("image_url");
  if (it == part.end()) bad(field, "has an image_url part without \"image_url\": {\"url\": ...}");
  const nlohmann::json* url = &*it;
  if (url->is_object()) {
    auto u = url->find("url");
    if (u == url->end()) bad(field, "has an image_url part without a \"url\"");
    url = &*u;
  }
  if (!url->is_string()) bad(field, "has an image_url whose url is not a string");
  const std::string& s = url->get_ref<const std::string&>();
  if (s.starts_with("http://") || s.starts_with("https://")) {
    *fetch_url = s;
    return {};
  }
  if (!s.starts_with("data:"))
    bad(field, "has an image_url that is not a data: URL (data:image/png;base64,...)");
  const size_t comma = s.find(',');
  if (comma == std::string::npos || s.substr(0, comma).find(";base64") == std::string::npos)
    bad(field, "has an image_url that is not a base64 data: URL (data:image/png;base64,...)");
  std::string bytes = base64_decode(std::string_view(s).substr(comma + 1), field);
  if (bytes.empty()) bad(field, "has an image_url holding no image bytes");
  return bytes;
}

}  // namespace ts::server
