#include "constrain/tool_formats/call_text.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "core/json_nesting.h"

namespace ts::tool_text {

size_t json_end(std::string_view text, size_t start) {
  if (start >= text.size() || (text[start] != '{' && text[start] != '[')) return std::string::npos;
  size_t depth = 0;
  bool in_string = false, escape = false;
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escape)
        escape = false;
      else if (c == '\\')
        escape = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string::npos;
}

bool arguments_object(std::string_view text, std::string& compact) {
  const nlohmann::json j = parse_json_or_discarded(text);
  if (!j.is_object()) return false;
  compact = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return true;
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

size_t skip_space(std::string_view text, size_t at) {
  while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  return at;
}

size_t add_json_call(std::string_view name, std::string_view text, size_t at,
                     std::vector<ToolCall>& calls) {
  at = skip_space(text, at);
  const size_t end = json_end(text, at);
  if (end == std::string::npos) return std::string::npos;
  std::string args;
  if (valid_name(name) && arguments_object(text.substr(at, end - at), args))
    calls.push_back({std::string(name), std::move(args)});
  return end;
}

}  // namespace ts::tool_text

namespace ts::tool_text {

std::vector<ToolCall> json_object_calls(std::string_view text, std::string_view args_key) {
  std::vector<ToolCall> calls;
  size_t i = 0;
  while ((i = text.find('{', i)) != std::string_view::npos) {
    const size_t end = json_end(text, i);
    if (end == std::string_view::npos) break;
    const nlohmann::json call = parse_json_or_discarded(text.substr(i, end - i));
    i = end;
    if (!call.is_object()) continue;
    const auto name = call.find("name");
    auto args = call.find(args_key);
    if (args == call.end()) args = call.find("arguments");
    if (name == call.end() || !name->is_string() || args == call.end()) continue;
    const std::string n = name->get<std::string>();
    std::string compact;
    if (args->is_object())
      compact = args->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    else if (!args->is_string() || !arguments_object(args->get<std::string>(), compact))
      continue;
    if (valid_name(n)) calls.push_back({n, std::move(compact)});
  }
  return calls;
}

}  // namespace ts::tool_text
