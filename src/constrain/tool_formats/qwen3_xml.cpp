// Qwen3-Coder and Qwen3.5: XML-style calls whose parameter values are raw text, not JSON,
//   <tool_call>
//   <function=get_weather>
//   <parameter=city>
//   Paris
//   </parameter>
//   </function>
//   </tool_call>
// A value is read by its parameter's declared type: a string stays text, anything else is read
// as JSON (as the template writes it, with tojson), falling back to text when it is not JSON.
// Not constrained: a string value is any text up to "\n</parameter>", which the JSON recognizers
// behind ToolCallPrefix do not describe (docs/SERVER.md).
#include <nlohmann/json.hpp>

#include "constrain/tool_formats/call_text.h"
#include "constrain/tool_formats/formats.h"
#include "core/json_nesting.h"

namespace ts::tool_formats {
namespace {

constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";

// Whether the tool's schema declares `parameter` a string (or declares nothing else for it).
bool declared_string(const ToolSet* tools, std::string_view function, std::string_view parameter) {
  if (tools == nullptr) return false;
  for (const Tool& t : tools->tools()) {
    if (t.name != function || !t.parameters.is_object()) continue;
    const auto props = t.parameters.find("properties");
    if (props == t.parameters.end() || !props->is_object()) return false;
    const auto p = props->find(std::string(parameter));
    if (p == props->end() || !p->is_object()) return false;
    const auto type = p->find("type");
    return type != p->end() && *type == "string";
  }
  return false;
}

// A value as the template writes it: a line break after the opening tag and before the closing.
std::string_view trim_lines(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return v;
}

nlohmann::json value(std::string_view text, bool string) {
  if (!string) {
    nlohmann::json j = parse_json_or_discarded(text);
    if (!j.is_discarded()) return j;
  }
  return std::string(text);
}

class Qwen3Xml final : public ToolFormat {
 public:
  std::string_view name() const override { return "qwen3_xml"; }
  std::string_view open() const override { return kToolCallOpen; }
  std::string forced_opening() const override { return std::string(kToolCallOpen) + "\n"; }
  std::vector<ToolCall> parse(std::string_view text, const ToolSet* tools) const override {
    std::vector<ToolCall> calls;
    size_t at = 0;
    while ((at = text.find(kFunction, at)) != std::string_view::npos) {
      at += kFunction.size();
      const size_t name_end = text.find('>', at);
      if (name_end == std::string_view::npos) break;
      const std::string_view name = text.substr(at, name_end - at);
      // A call cut off before its end (a length limit) is no call.
      const size_t end = text.find(kFunctionEnd, name_end);
      if (end == std::string_view::npos) break;
      const std::string_view body = text.substr(name_end + 1, end - name_end - 1);
      at = end;
      if (!tool_text::valid_name(name)) continue;
      nlohmann::json args = nlohmann::json::object();
      size_t p = 0;
      while ((p = body.find(kParameter, p)) != std::string_view::npos) {
        p += kParameter.size();
        const size_t key_end = body.find('>', p);
        if (key_end == std::string_view::npos) break;
        const std::string key(body.substr(p, key_end - p));
        // A value ends at its closing tag, or where the next parameter opens without one.
        size_t stop = std::min(body.find(kParameterEnd, key_end), body.find(kParameter, key_end));
        if (stop == std::string_view::npos) stop = body.size();
        const std::string_view raw = trim_lines(body.substr(key_end + 1, stop - key_end - 1));
        args[key] = value(raw, declared_string(tools, name, key));
        p = stop;
      }
      calls.push_back(
          {std::string(name), args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
    }
    return calls;
  }
};

}  // namespace

const ToolFormat& qwen3_xml() {
  static const Qwen3Xml format;
  return format;
}

}  // namespace ts::tool_formats
