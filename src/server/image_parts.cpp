#include "server/image_parts.h"

#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/error.h"
#include "server/json_fields.h"

namespace ts::server {

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
  std::string bytes =
      base64_decode(std::string_view(s).substr(comma + 1), ErrorKind::Input, "'" + field + "'");
  if (bytes.empty()) bad(field, "has an image_url holding no image bytes");
  return bytes;
}

}  // namespace ts::server
