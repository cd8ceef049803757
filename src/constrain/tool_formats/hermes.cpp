// Hermes (Qwen 2.5 / 3, Hermes 2 / 3, SmolLM3, and the form the server teaches a template that
// lists no tools itself):
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
#include "constrain/tool_formats/call_text.h"
#include "constrain/tool_formats/formats.h"

namespace ts::tool_formats {
namespace {

class Hermes final : public ToolFormat {
 public:
  std::string_view name() const override { return "hermes"; }
  std::string_view open() const override { return kToolCallOpen; }
  std::string forced_opening() const override { return std::string(kToolCallOpen) + "\n"; }
  std::vector<ToolCall> parse(std::string_view text, const ToolSet*) const override {
    return tool_text::json_object_calls(text, "arguments");
  }
  const CallEnvelope* envelope() const override { return &envelope_; }

 private:
  CallEnvelope envelope_{.head = R"({"name": ")",
                         .name_end = '"',
                         .middle = R"(, "arguments": )",
                         .tail = "}",
                         .close = "\n</tool_call>",
                         .next = "\n<tool_call>",
                         .lead_space = true};
};

}  // namespace

const ToolFormat& hermes() {
  static const Hermes format;
  return format;
}

}  // namespace ts::tool_formats
