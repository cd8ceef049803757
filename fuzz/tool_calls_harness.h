// What one tool-call fuzz input checks: the first byte picks a format (constrain/tool_format.h),
// the rest is model output. Shared by the libFuzzer target and the replay test.
//  * The format's parser reads any text without throwing, and every call it returns has a valid
//    name and arguments that are one JSON object.
//  * For a constrained format, the longest prefix of the text its envelope (ToolCallPrefix)
//    accepts completes greedily to a whole answer whose calls the parser reads, each naming a
//    declared tool with arguments that fit its schema: a call steered by the constraint always
//    comes back as a call.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/tool_calls.h"
#include "constrain/tool_format.h"
#include "constrain/tool_formats/call_text.h"
#include "json_schema_harness.h"
#include "parser_harness.h"

namespace ts::fuzz {

inline const ToolSet& fuzz_tools(bool parallel) {
  static const auto make = [](bool p) {
    const auto tool = [](const char* name, const char* schema) {
      const nlohmann::json j = nlohmann::json::parse(schema);
      return Tool{name, "", j, std::make_shared<const JsonSchema>(JsonSchema::compile(j))};
    };
    return ToolSet({tool("get_weather", R"({"type": "object", "properties": {"city": {"type":
                        "string"}, "days": {"type": "integer"}}, "required": ["city"]})"),
                    tool("get", R"({"type": "object", "properties": {"tz": {"enum": ["UTC",
                        "CET"]}}})")},
                   p);
  };
  static const ToolSet serial = make(false), several = make(true);
  return parallel ? several : serial;
}

// The greedy completion's byte order for calls: the schema's (closers first), with '<' early, so
// that where the calls may end or go on (DeepSeek's end marker or "\n" and another call) the end
// is taken instead of call after call.
inline const std::string& tool_completion_order() {
  static const std::string order = [] {
    std::string o = "\"}]<";
    for (char c : schema_completion_order())
      if (o.find(c) == std::string::npos) o += c;
    return o;
  }();
  return order;
}

// Completes `p` greedily into `out`; false when it gives up (budget spent).
inline bool complete_call_greedily(ToolCallPrefix& p, std::string& out, size_t budget) {
  while (!p.complete()) {
    if (!feed_first_taken(p, tool_completion_order(), out))
      violated("an accepted call prefix has no continuation: " + out);
    if (out.size() > budget) return false;
  }
  return true;
}

// True when the parser read at least one call.
inline bool check_tool_calls(const uint8_t* data, size_t size) {
  if (size == 0) return false;
  const std::vector<const ToolFormat*> formats = all_tool_formats();
  const ToolFormat& format = *formats[data[0] % formats.size()];
  const bool parallel = (data[0] / formats.size()) % 2 == 1;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto tools = fuzz_tools(parallel).in_format(format);
  const std::vector<ToolCall> calls = format.parse(text, tools.get());
  for (const ToolCall& c : calls) {
    if (!tool_text::valid_name(c.name)) violated("a call with an invalid name: " + c.name);
    if (!nlohmann::json::parse(c.arguments, nullptr, false).is_object())
      violated("arguments that are no object: " + c.arguments);
  }
  if (format.envelope() == nullptr) return !calls.empty();
  ToolCallPrefix p(tools.get());
  std::string out;
  if (format.open_in_call()) {
    if (!p.feed_all(format.open())) violated("the envelope refuses its own opening");
    out = format.open();
  }
  for (char c : text) {
    if (!p.feed(static_cast<uint8_t>(c))) break;
    out += c;
  }
  if (!complete_call_greedily(p, out, out.size() + 4096))
    violated("a call prefix that the greedy completion does not end: " + out);
  const std::string body = format.open_in_call() ? out.substr(format.open().size()) : out;
  const std::vector<ToolCall> steered = format.parse(body, tools.get());
  if (steered.empty()) violated("a completed call does not read: " + out);
  for (const ToolCall& c : steered) {
    const Tool* declared = nullptr;
    for (const Tool& t : tools->tools())
      if (t.name == c.name) declared = &t;
    if (declared == nullptr) violated("a steered call names an undeclared tool: " + c.name);
    if (!schema_valid(nlohmann::json::parse(c.arguments), declared->parameters,
                      declared->parameters))
      violated("steered arguments outside the schema: " + out);
  }
  return !calls.empty();
}

}  // namespace ts::fuzz
