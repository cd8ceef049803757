#include "constrain/tool_calls.h"

#include <algorithm>

#include "constrain/tool_formats/call_text.h"
#include "core/error.h"
#include "core/json_nesting.h"

namespace ts {

using nlohmann::json;

namespace {

constexpr std::string_view kHead = R"({"name": ")";
constexpr std::string_view kMiddle = R"(, "arguments": )";
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
    : tools_(std::move(tools)), parallel_(parallel), format_(&hermes_tool_format()) {
  std::sort(tools_.begin(), tools_.end(),
            [](const Tool& a, const Tool& b) { return a.name < b.name; });
  for (size_t i = 1; i < tools_.size(); ++i)
    if (tools_[i].name == tools_[i - 1].name)
      fail(ErrorKind::Input, "two tools are named '" + tools_[i].name + "'");
  name_calls();
}

// Sorted with the name's end byte: '<' or '\n' sort differently from '"' against a longer name
// ("get<" after "get1<", "get\"" before "get1\"").
void ToolSet::name_calls() {
  const char end = envelope().name_end;
  std::vector<std::pair<std::string, size_t>> named;
  for (size_t i = 0; i < tools_.size(); ++i) named.emplace_back(tools_[i].name + end, i);
  std::sort(named.begin(), named.end());
  quoted_.clear();
  quoted_tool_.clear();
  for (auto& [text, index] : named) {
    quoted_.push_back(std::move(text));
    quoted_tool_.push_back(index);
  }
}

const CallEnvelope& ToolSet::envelope() const {
  const CallEnvelope* own = format_->envelope();
  return own != nullptr ? *own : *hermes_tool_format().envelope();
}

std::shared_ptr<const ToolSet> ToolSet::in_format(const ToolFormat& format) const {
  auto set = std::make_shared<ToolSet>(*this);
  set->format_ = &format;
  set->name_calls();
  return set;
}

std::string ToolSet::functions_listed() const {
  std::string out;
  for (const Tool& t : tools_) {
    nlohmann::ordered_json function = {{"name", t.name}};
    if (!t.description.empty()) function["description"] = t.description;
    function["parameters"] = nlohmann::ordered_json::parse(t.parameters.dump());
    out += '\n';
    out += python_style(nlohmann::ordered_json{{"type", "function"}, {"function", function}});
  }
  return out;
}

std::string ToolSet::system_block() const {
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  out += functions_listed();
  return out +
         "\n</tools>\n\nFor each function call, return a json object with function name and "
         "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
         "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
}

std::string ToolSet::format_system_block() const {
  const CallEnvelope* env = format_->envelope();
  if (env == nullptr || format_ == &hermes_tool_format()) return system_block();
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "The functions, as JSON:";
  out += functions_listed();
  // An example call spelled by the envelope the calls are held to.
  const std::string example = std::string(env->head) + "function_name" + env->name_end +
                              std::string(env->middle) + R"({"argument": "value"})" +
                              std::string(env->tail);
  return out + "\n\nTo call a function, write:\n" + std::string(format_->open()) +
         std::string(env->start) +
         (format_->open_in_call() ? example.substr(format_->open().size()) : example) +
         std::string(env->end);
}

std::shared_ptr<const ToolSet> ToolSet::only(const std::string& name) const {
  for (const Tool& t : tools_)
    if (t.name == name) return ToolSet(std::vector<Tool>{t}, parallel_).in_format(*format_);
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
  for (size_t i = text.find('{'); i != std::string_view::npos; i = text.find('{', i)) {
    const size_t end = tool_text::json_end(text, i);
    if (end == std::string_view::npos) break;  // an unclosed call: not one yet
    calls.push_back(parse_tool_call(text.substr(i, end - i)));
    i = end;
  }
  return calls;
}

std::string tool_call_text(const std::string& name, const std::string& arguments_json) {
  return std::string(kToolCallOpen) + "\n" + std::string(kHead) + name + "\"" +
         std::string(kMiddle) + arguments_json + "}\n</tool_call>";
}

void ToolCallPrefix::enter(Phase phase) {
  offset_ = 0;
  for (;;) {
    phase_ = phase;
    switch (phase) {
      case Phase::Start:
        if (!env_->start.empty()) return;
        phase = Phase::Lead;
        continue;
      case Phase::Lead:
        lead_spaces_ = 0, lead_break_ = false;
        if (env_->lead_space && !env_->head.empty()) return;
        phase = Phase::Head;
        continue;
      case Phase::Head:
        if (!env_->head.empty()) return;
        phase = Phase::Name;
        continue;
      case Phase::Name:
        lo_ = 0, hi_ = static_cast<uint32_t>(tools_->quoted_names().size());
        return;
      case Phase::Middle:
        if (!env_->middle.empty()) return;
        phase = Phase::Arguments;
        continue;
      case Phase::Arguments:
      case Phase::Done:
        return;
      case Phase::Tail:
        if (!env_->tail.empty()) return;
        phase = tools_->several() ? Phase::Close : Phase::End;
        continue;
      case Phase::Close:
        if (!env_->close.empty()) return;
        phase = Phase::Next;
        continue;
      case Phase::Next:
        next_end_ = !env_->end.empty(), next_call_ = true;
        return;
      case Phase::End:
        if (!env_->end.empty()) return;
        phase = Phase::Done;
        continue;
    }
  }
}

bool ToolCallPrefix::literal(std::string_view text, uint8_t c, Phase after) {
  if (c != static_cast<uint8_t>(text[offset_])) return false;
  if (++offset_ == text.size()) enter(after);
  return true;
}

bool ToolCallPrefix::feed(uint8_t c) {
  if (tools_ == nullptr) return false;
  switch (phase_) {
    case Phase::Start:
      return literal(env_->start, c, Phase::Lead);
    case Phase::Lead:
      if (c == '\n' && !lead_break_) {
        lead_break_ = true;
        return true;
      }
      if ((c == ' ' || c == '\t') && lead_spaces_ < kMaxLeadSpaces) {
        ++lead_spaces_;
        return true;
      }
      if (c != static_cast<uint8_t>(env_->head[0])) return false;
      phase_ = Phase::Head, offset_ = 1;
      if (offset_ == env_->head.size()) enter(Phase::Name);
      return true;
    case Phase::Head:
      return literal(env_->head, c, Phase::Name);
    case Phase::Name: {
      uint32_t lo = lo_, hi = hi_;
      if (!narrow_sorted(tools_->quoted_names(), offset_, c, lo, hi)) return false;
      lo_ = lo, hi_ = hi, ++offset_;
      // Names hold no end byte: this one is whole, and the only one left.
      if (c == static_cast<uint8_t>(env_->name_end)) {
        arguments_ = SchemaPrefix(tools_->tools()[tools_->quoted_tool(lo_)].schema.get());
        enter(Phase::Middle);
      }
      return true;
    }
    case Phase::Middle:
      return literal(env_->middle, c, Phase::Arguments);
    case Phase::Arguments:
      if (!arguments_.feed(c)) return false;
      if (arguments_.complete()) enter(Phase::Tail);
      return true;
    case Phase::Tail:
      return literal(env_->tail, c, tools_->several() ? Phase::Close : Phase::End);
    case Phase::Close:
      return literal(env_->close, c, Phase::Next);
    case Phase::Next: {
      // The end, or the way to another call (the next head itself when nothing comes between).
      const std::string_view end = env_->end;
      const std::string_view call = env_->next.empty() ? env_->head : env_->next;
      const bool e = next_end_ && offset_ < end.size() && c == static_cast<uint8_t>(end[offset_]);
      const bool k =
          next_call_ && offset_ < call.size() && c == static_cast<uint8_t>(call[offset_]);
      if (!e && !k) return false;
      next_end_ = e, next_call_ = k, ++offset_;
      if (e && offset_ == end.size())
        enter(Phase::Done);
      else if (k && offset_ == call.size())
        enter(env_->next.empty() ? Phase::Name : Phase::Lead);
      return true;
    }
    case Phase::End:
      return literal(env_->end, c, Phase::Done);
    default:
      return false;
  }
}

}  // namespace ts
