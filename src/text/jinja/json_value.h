// Template values from and to JSON: the conversation, tools and options a chat template renders
// come in as JSON; its `tojson` filter writes Python's json.dumps(ensure_ascii=False), the way
// transformers overrides jinja2's own (which would HTML-escape).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace ts::jinja {

// Objects keep their key order (nlohmann::ordered_json does; nlohmann::json sorts its keys).
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

struct DumpOptions {
  std::optional<std::string> indent;  // json.dumps' indent, as the string one level adds
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii =
      false;  // non-ASCII characters as \uXXXX escapes (surrogate pairs past U+FFFF)
};

// json.dumps; nullopt when `v` holds something JSON cannot write (Undefined, a macro, ...), whose
// type is then in `bad_type`.
std::optional<std::string> dump_json(const Value& v, const DumpOptions& options,
                                     std::string& bad_type);

}  // namespace ts::jinja
