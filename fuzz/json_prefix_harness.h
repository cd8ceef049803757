// What one JSON-mode fuzz input checks: JsonPrefix against nlohmann's parser on the input's bytes,
// and its invariant that an accepted prefix can always be completed. Shared by the libFuzzer target
// and the replay test.
//  * A text nlohmann reads as one object (no whitespace after it, no NUL byte, within
//    JsonPrefix's limits) is accepted byte by byte and complete at its end.
//  * A text JsonPrefix accepts and completes is one nlohmann reads.
//  * From the longest prefix it accepts, a greedy completion (bytes tried in a fixed order, the
//    first it takes each time) reaches a complete object that nlohmann reads: steering a model by
//    the recognizer can never leave it without a continuation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "constrain/json_prefix.h"
#include "parser_harness.h"

namespace ts::fuzz {

// What JsonPrefix limits, outside strings: nesting depth, how far a whitespace run's bytes other
// than '\n' go past the limit at its depth, the most line breaks in one run (a '\r' counts as two:
// it is refused), the longest run of digits before or after a number's point, and the longest
// exponent.
struct JsonExtents {
  int depth = 0, whitespace_excess = 0, line_breaks = 0, digits = 0, exponent = 0;
  bool within_limits() const {
    return depth <= JsonPrefix::kMaxDepth && whitespace_excess <= 0 && line_breaks <= 1 &&
           digits <= JsonPrefix::kMaxDigits && exponent <= JsonPrefix::kMaxExponentDigits;
  }
};

inline JsonExtents json_extents(std::string_view text) {
  JsonExtents e;
  int d = 0, ws = 0, breaks = 0, run = 0;
  bool in_string = false, escape = false, exponent = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (escape)
        escape = false;
      else if (ch == '\\')
        escape = true;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    const bool space = ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
    ws = space ? ws + (ch != '\n') : 0;
    breaks = space ? breaks + (ch == '\n' ? 1 : ch == '\r' ? 2 : 0) : 0;
    e.whitespace_excess = std::max(e.whitespace_excess, ws - JsonPrefix::whitespace_limit(d));
    e.line_breaks = std::max(e.line_breaks, breaks);
    if (ch >= '0' && ch <= '9') {
      if (run++ == 0) {  // a run starts: after e / E (and a sign) it is an exponent
        const char p = i > 0 ? text[i - 1] : ' ', pp = i > 1 ? text[i - 2] : ' ';
        exponent = p == 'e' || p == 'E' || ((p == '+' || p == '-') && (pp == 'e' || pp == 'E'));
      }
      int& longest = exponent ? e.exponent : e.digits;
      longest = std::max(longest, run);
    } else {
      run = 0;
    }
    if (ch == '"') in_string = true;
    if (ch == '{' || ch == '[') e.depth = std::max(e.depth, ++d);
    if (ch == '}' || ch == ']') --d;
  }
  return e;
}

// Feeds `p` (JsonPrefix or SchemaPrefix) the first byte of `order` it takes, appending it to
// `out`; false when it takes none.
template <class Recognizer>
bool feed_first_taken(Recognizer& p, std::string_view order, std::string& out) {
  for (char c : order)
    if (p.feed(static_cast<uint8_t>(c))) {
      out += c;
      return true;
    }
  return false;
}

inline bool check_json_prefix(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  JsonPrefix p;
  size_t taken = 0;
  while (taken < size && p.feed(data[taken])) ++taken;
  const bool all = taken == size;
  const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  const bool object = !parsed.is_discarded() && parsed.is_object();
  if (all && p.complete() && !object) violated("JsonPrefix completed a text nlohmann refuses");
  // nlohmann ends its input at a NUL byte, and reads whitespace after the object; JsonPrefix
  // refuses both.
  if (object && text.back() == '}' && text.find('\0') == std::string_view::npos) {
    if (json_extents(text).within_limits() && !(all && p.complete()))
      violated("JsonPrefix refused an object nlohmann reads, at byte " + std::to_string(taken));
  }
  // Complete what was accepted: the first byte of this list the recognizer takes, each time.
  static constexpr std::string_view kTries =
      "\"}]0:DC\\u\x80\x90\xA0"
      "abcdefghijklmnopqrstuvwxyz{";
  std::string completed(text.substr(0, taken));
  for (int steps = 0; !p.complete(); ++steps) {
    if (!feed_first_taken(p, kTries, completed) || steps > 100000)
      violated("an accepted prefix could not be completed");
  }
  if (!nlohmann::json::accept(completed)) violated("the completion is not JSON: " + completed);
  return all;
}

}  // namespace ts::fuzz
