// Llama 3.1 / 3.2 / 3.3 with custom tools: the answer is one bare JSON object,
//   {"name": "get_weather", "parameters": {"city": "Paris"}}
// (the templates refuse more than one call per message). There is no marker, so the object's
// own opening is the marker: an answer of prose that quotes it would be read as a call, which is
// what llama.cpp does too.
#include "constrain/tool_formats/call_text.h"
#include "constrain/tool_formats/formats.h"

namespace ts::tool_formats {
namespace {

constexpr std::string_view kOpen = R"({"name": ")";

class Llama3 final : public ToolFormat {
 public:
  std::string_view name() const override { return "llama3"; }
  std::string_view open() const override { return kOpen; }
  bool open_in_call() const override { return true; }
  std::vector<ToolCall> parse(std::string_view text, const ToolSet*) const override {
    std::vector<ToolCall> calls =
        tool_text::json_object_calls(std::string(kOpen) + std::string(text), "parameters");
    if (calls.size() > 1) calls.resize(1);
    return calls;
  }
  const CallEnvelope* envelope() const override { return &envelope_; }

 private:
  CallEnvelope envelope_{
      .head = kOpen, .name_end = '"', .middle = R"(, "parameters": )", .tail = "}", .single = true};
};

}  // namespace

const ToolFormat& llama3() {
  static const Llama3 format;
  return format;
}

}  // namespace ts::tool_formats
