#include "text/tool_calls.h"

#include <algorithm>

#include "core/error.h"
#include "core/json_nesting.h"

namespace ts {

using nlohmann::json;

namespace {

constexpr std::string_view kHead = R"({"name": ")";
constexpr std::string_view kMiddle = R"(, "arguments": )";
constexpr std::string_view kClose = "\n</tool_call>";
constexpr std::string_view kNext = "\n<tool_call>";
constexpr uint8_t kMaxLeadSpaces = 4;

// JSON as Python's json.dumps writes it (", " and ": " between items, keys in the order given),
// which is how the Jinja templates these models were trained with print the tool definitions.
std::string python_style(const nlohmann::ordered_json& j) {
  std::string out;
  if (j.is_object()) {
    out += '{';
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it != j.begin()) out += ", ";
      out += json(it.key()).dump() + ": " + python_style(it.value());
    }
    return out + '}';
  }
  if (j.is_array()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) out += (i > 0 ? ", " : "") + python_style(j[i]);
    return out + ']';
  }
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

ToolSet::ToolSet(std::vector<Tool> tools, bool parallel)
    : tools_(std::move(tools)), parallel_(parallel) {
  std::sort(tools_.begin(), tools_.end(),
            [](const Tool& a, const Tool& b) { return a.name < b.name; });
  for (size_t i = 0; i < tools_.size(); ++i) {
    if (i > 0 && tools_[i].name == tools_[i - 1].name)
      fail(ErrorKind::Input, "two tools are named '" + tools_[i].name + "'");
    quoted_.push_back(tools_[i].name + "\"");
  }
}

std::string ToolSet::system_block() const {
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const Tool& t : tools_) {
    nlohmann::ordered_json function = {{"name", t.name}};
    if (!t.description.empty()) function["description"] = t.description;
    function["parameters"] = nlohmann::ordered_json::parse(t.parameters.dump());
    out += '\n';
    out += python_style(nlohmann::ordered_json{{"type", "function"}, {"function", function}});
  }
  return out +
         "\n</tools>\n\nFor each function call, return a json object with function name and "
         "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
         "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
}

std::shared_ptr<const ToolSet> ToolSet::only(const std::string& name) const {
  for (const Tool& t : tools_)
    if (t.name == name) return std::make_shared<const ToolSet>(std::vector<Tool>{t}, parallel_);
  fail(ErrorKind::Input, "no tool is named '" + name + "'");
}

ToolCall parse_tool_call(std::string_view text) {
  const size_t open = text.find('{');
  const json call = open == std::string_view::npos ? json(json::value_t::discarded)
                                                   : parse_json_or_discarded(text.substr(open));
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string() ||
      !call.contains("arguments") || !call["arguments"].is_object())
    fail(ErrorKind::Runtime, "a tool call that does not parse: " + std::string(text));
  return {call["name"].get<std::string>(), call["arguments"].dump()};
}

// The calls are the top-level objects of the text; the markers between them hold no brace or
// quote, while a call's strings may hold anything (even "</tool_call>"), so they are skipped.
std::vector<ToolCall> parse_tool_calls(std::string_view text) {
  std::vector<ToolCall> calls;
  int depth = 0;
  bool in_string = false, escape = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escape)
        escape = false;
      else if (c == '\\')
        escape = true;
      else if (c == '"')
        in_string = false;
    } else if (depth > 0 && c == '"') {
      in_string = true;
    } else if (c == '{' || (depth > 0 && c == '[')) {
      if (depth++ == 0) start = i;
    } else if (depth > 0 && (c == '}' || c == ']') && --depth == 0) {
      calls.push_back(parse_tool_call(text.substr(start, i + 1 - start)));
    }
  }
  return calls;
}

std::string tool_call_text(const std::string& name, const std::string& arguments_json) {
  return std::string(kToolCallOpen) + "\n" + std::string(kHead) + name + "\"" +
         std::string(kMiddle) + arguments_json + "}\n</tool_call>";
}

bool ToolCallPrefix::feed(uint8_t c) {
  if (tools_ == nullptr) return false;
  switch (phase_) {
    case Phase::Lead:
      if (c == '\n' && !lead_break_) {
        lead_break_ = true;
        return true;
      }
      if ((c == ' ' || c == '\t') && lead_spaces_ < kMaxLeadSpaces) {
        ++lead_spaces_;
        return true;
      }
      if (c != static_cast<uint8_t>(kHead[0])) return false;
      phase_ = Phase::Head, offset_ = 1;
      return true;
    case Phase::Head:
      if (c != static_cast<uint8_t>(kHead[offset_])) return false;
      if (++offset_ == kHead.size())
        phase_ = Phase::Name, offset_ = 0, lo_ = 0,
        hi_ = static_cast<uint32_t>(tools_->quoted_names().size());
      return true;
    case Phase::Name: {
      uint32_t lo = lo_, hi = hi_;
      if (!narrow_sorted(tools_->quoted_names(), offset_, c, lo, hi)) return false;
      lo_ = lo, hi_ = hi, ++offset_;
      if (c == '"') {  // names hold no quote: this one is whole, and the only one left
        phase_ = Phase::Middle, offset_ = 0;
        arguments_ = SchemaPrefix(tools_->tools()[lo_].schema.get());
      }
      return true;
    }
    case Phase::Middle:
      if (c != static_cast<uint8_t>(kMiddle[offset_])) return false;
      if (++offset_ == kMiddle.size()) phase_ = Phase::Arguments;
      return true;
    case Phase::Arguments:
      if (!arguments_.feed(c)) return false;
      if (arguments_.complete()) phase_ = Phase::Tail;
      return true;
    case Phase::Tail:
      if (c != '}') return false;
      phase_ = tools_->parallel() ? Phase::Close : Phase::Done, offset_ = 0;
      return true;
    case Phase::Close:
      if (c != static_cast<uint8_t>(kClose[offset_])) return false;
      if (++offset_ == kClose.size()) phase_ = Phase::Next, offset_ = 0;
      return true;
    case Phase::Next:
      if (c != static_cast<uint8_t>(kNext[offset_])) return false;
      if (++offset_ == kNext.size())
        phase_ = Phase::Lead, offset_ = 0, lead_spaces_ = 0, lead_break_ = false;
      return true;
    default:
      return false;
  }
}

}  // namespace ts
