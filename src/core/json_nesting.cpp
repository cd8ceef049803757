#include "core/json_nesting.h"

#include <string>

#include "core/error.h"
#include "core/mapped_file.h"

namespace ts {

size_t json_nesting(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escape = false;
  for (char c : text) {
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) break;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

void require_json_nesting(std::string_view text, const std::string& what, ErrorKind kind) {
  if (json_nesting(text) > kMaxJsonNesting)
    fail(kind, what + " nests arrays and objects deeper than " + std::to_string(kMaxJsonNesting) +
                   " levels");
}

nlohmann::json parse_json_bounded(std::string_view text, const std::string& what, ErrorKind kind) {
  require_json_nesting(text, what, kind);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) fail(kind, what + " is not valid JSON");
  return j;
}

nlohmann::json parse_json_file(const std::string& path) {
  const MappedFile file(path);
  return parse_json_bounded({reinterpret_cast<const char*>(file.data()), file.size()}, path,
                            ErrorKind::Model);
}

nlohmann::json parse_json_or_discarded(std::string_view text) {
  if (json_nesting(text) > kMaxJsonNesting)
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, false);
}

}  // namespace ts
