// What one JSON-schema fuzz input checks. The input is a schema's JSON text, a NUL byte, then
// bytes fed to SchemaPrefix. Shared by the libFuzzer target and the replay test.
//  * The schema compiles or is refused with a ts::Error; nothing else escapes.
//  * A text SchemaPrefix accepts and completes parses, and `valid` below (an independent reading
//    of the same keywords, on parsed values, as the JSON Schema specification states them)
//    accepts it.
//  * From the longest prefix it accepts, a greedy completion (bytes tried in a fixed order,
//    closers first) reaches such a text: steering a model by the schema never leaves it without a
//    continuation.
//  * The same holds for the bytes as a tool call's arguments (ToolCallPrefix, the schema as the
//    parameters of tool "f"): the completed call parses, names "f", and its arguments satisfy it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/json_schema.h"
#include "constrain/schema_prefix.h"
#include "constrain/tool_calls.h"
#include "core/error.h"
#include "json_prefix_harness.h"
#include "parser_harness.h"

namespace ts::fuzz {

// $refs followed without descending into the value: a cycle of them validates nothing, so a
// branch that only loops is false (the least fixed point), whatever the other branches say.
constexpr int kMaxRefHops = 64;

inline bool schema_valid(const nlohmann::json& v, const nlohmann::json& s,
                         const nlohmann::json& root, int hops = 0);

inline bool type_valid(const nlohmann::json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  return type == "null" && v.is_null();
}

// A JSON number as a long double, which holds every int64, uint64 and double exactly (x86's
// 64-bit mantissa): bounds are compared without the rounding a double would add past 2^53.
inline long double exact_number(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
  return static_cast<long double>(v.get<double>());
}

inline size_t code_points(const std::string& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

inline bool schema_valid(const nlohmann::json& v, const nlohmann::json& s,
                         const nlohmann::json& root, int hops) {
  using nlohmann::json;
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  if (s.contains("$ref")) {
    if (hops >= kMaxRefHops) return false;
    const std::string ref = s["$ref"].get<std::string>();
    return schema_valid(v, root.at(json::json_pointer(ref.substr(1))), root, hops + 1);
  }
  if (s.contains("allOf"))
    for (const json& b : s["allOf"])
      if (!schema_valid(v, b, root, hops + 1)) return false;
  if (s.contains("anyOf")) {
    bool any = false;
    for (const json& b : s["anyOf"]) any = any || schema_valid(v, b, root, hops + 1);
    if (!any) return false;
  }
  if (s.contains("oneOf")) {
    int matches = 0;
    for (const json& b : s["oneOf"]) matches += schema_valid(v, b, root, hops + 1);
    if (matches != 1) return false;
  }
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
    return false;
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string()) types.push_back(s["type"]);
    if (s["type"].is_array())
      for (const json& t : s["type"]) types.push_back(t);
    const bool nullable = s.value("nullable", false) && v.is_null();
    if (!nullable && std::none_of(types.begin(), types.end(),
                                  [&](const std::string& t) { return type_valid(v, t); }))
      return false;
  }
  if (v.is_object()) {
    const json props = s.value("properties", json::object());
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return false;
    const json additional = s.value("additionalProperties", json(true));
    for (const auto& [k, x] : v.items())
      if (!schema_valid(x, props.contains(k) ? props[k] : additional, root)) return false;
  }
  if (v.is_array()) {
    if (v.size() < s.value("minItems", uint64_t{0}) || v.size() > s.value("maxItems", ~uint64_t{0}))
      return false;
    for (const json& x : v)
      if (!schema_valid(x, s.value("items", json(true)), root)) return false;
  }
  if (v.is_number()) {
    const long double x = exact_number(v);
    if ((s.contains("minimum") && x < exact_number(s["minimum"])) ||
        (s.contains("maximum") && x > exact_number(s["maximum"])) ||
        (s.contains("exclusiveMinimum") && x <= exact_number(s["exclusiveMinimum"])) ||
        (s.contains("exclusiveMaximum") && x >= exact_number(s["exclusiveMaximum"])))
      return false;
  }
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (n < s.value("minLength", uint64_t{0}) || n > s.value("maxLength", ~uint64_t{0}))
      return false;
  }
  return true;
}

// Bytes the greedy completion tries, in order: closers first, openers last, so that it ends each
// container as soon as the schema lets it.
inline const std::string& schema_completion_order() {
  static const std::string order = [] {
    std::string o = "\"}],0:\\uabcdefghijklmnopqrstuvwxyz";
    for (int c = 0; c < 256; ++c)
      if (c != '{' && c != '[' && o.find(static_cast<char>(c)) == std::string::npos)
        o += static_cast<char>(c);
    return o + "{[";
  }();
  return order;
}

// The bytes of `alphabet` that `p` takes next; when none, every byte it takes (a key's or an enum
// value's next letter may lie outside the alphabet). Random walks through a recognizer pick here.
template <class Recognizer>
std::string next_bytes(const Recognizer& p, std::string_view alphabet) {
  std::string out;
  for (char c : alphabet)
    if (p.accepts(std::string_view(&c, 1))) out += c;
  for (int b = 0; b < 256 && out.empty(); ++b) {
    const char c = static_cast<char>(b);
    if (p.accepts(std::string_view(&c, 1))) out += c;
  }
  return out;
}

// Whether some minItems / minLength could make a shortest instance too long to write out here.
inline bool has_large_minimum(const nlohmann::json& s) {
  if (s.is_object()) {
    for (const char* k : {"minItems", "minLength"})
      if (const auto m = s.find(k); m != s.end() && m->is_number() && m->get<double>() > 1) {
        return true;
      }
  }
  if (s.is_structured())
    for (const auto& x : s)
      if (has_large_minimum(x)) return true;
  return false;
}

// Completes `p` (SchemaPrefix or ToolCallPrefix) greedily into `out`; false when it gives up
// (budget spent).
template <class Recognizer>
bool complete_schema_greedily(Recognizer& p, std::string& out, size_t budget) {
  while (!p.complete()) {
    if (!feed_first_taken(p, schema_completion_order(), out))
      violated("an accepted prefix has no continuation: " + out);
    if (out.size() > budget) return false;
  }
  return true;
}

inline void expect_valid_instance(const std::string& text, const nlohmann::json& schema,
                                  const char* what) {
  const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  if (parsed.is_discarded()) violated(std::string(what) + " is not JSON: " + text);
  if (!schema_valid(parsed, schema, schema))
    violated(std::string(what) + " does not satisfy the schema: " + text +
             "\nschema: " + schema.dump());
}

// Feeds `p` the longest prefix of `doc` it takes after `text`, completes it greedily, and returns
// the whole text; "" when the greedy completion needs more than the budget allows.
template <class Recognizer>
std::string walk(Recognizer p, std::string text, std::string_view doc,
                 const nlohmann::json& schema) {
  size_t taken = 0;
  while (taken < doc.size() && p.feed(static_cast<uint8_t>(doc[taken]))) ++taken;
  text += doc.substr(0, taken);
  const size_t budget = has_large_minimum(schema) ? 20000 : 200000;
  if (complete_schema_greedily(p, text, budget)) return text;
  if (budget == 200000) violated("the greedy completion ran away: " + text.substr(0, 300));
  return "";  // minimums nested deep enough to need more than the budget
}

inline bool check_json_schema(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view schema_text = input.substr(0, nul);
  const std::string_view doc = nul == std::string_view::npos ? "" : input.substr(nul + 1);
  const nlohmann::json schema = nlohmann::json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return false;
  std::shared_ptr<const JsonSchema> compiled;
  try {
    compiled = std::make_shared<const JsonSchema>(JsonSchema::compile(schema));
  } catch (const Error&) {
    return false;
  }
  const std::string text = walk(SchemaPrefix(compiled.get()), "", doc, schema);
  if (!text.empty()) expect_valid_instance(text, schema, "a completion");
  // The same bytes as the arguments of a call to a tool with this schema as its parameters.
  const ToolSet tools({Tool{"f", "", schema, compiled}});
  ToolCallPrefix call(&tools);
  const std::string head = R"({"name": "f", "arguments": )";
  if (!call.feed_all(head)) violated("a tool call's envelope was refused");
  const std::string call_text = walk(call, head, doc, schema);
  if (call_text.empty()) return true;
  const std::vector<ToolCall> parsed = parse_tool_calls(call_text);
  if (parsed.size() != 1 || parsed[0].name != "f")
    violated("the completion is not one call of tool f: " + call_text);
  expect_valid_instance(parsed[0].arguments, schema, "a call's arguments");
  return true;
}

}  // namespace ts::fuzz
