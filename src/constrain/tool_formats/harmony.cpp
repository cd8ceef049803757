// gpt-oss's harmony format: a call is a message to a function, in the commentary channel,
//   <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":
//   "Paris"}<|call|>
// (its template writes the recipient in the header instead, "<|start|>assistant
// to=functions.get_weather<|channel|>commentary json<|message|>": both are read). <|call|> ends
// the generation, so an answer holds one call. The channel markers are control tokens, shown so
// that the call (and, in text/harmony.h, the analysis and final channels) can be read.
#include "constrain/tool_formats/call_text.h"
#include "constrain/tool_formats/formats.h"

namespace ts::tool_formats {
namespace {

constexpr std::string_view kMessage = "<|message|>";

class Harmony final : public ToolFormat {
 public:
  std::string_view name() const override { return "harmony"; }
  std::string_view open() const override { return " to=functions."; }
  // The prompt ends with "<|start|>assistant": the call's channel comes first.
  std::string forced_opening() const override { return "<|channel|>commentary to=functions."; }
  std::vector<std::string> preserved_tokens() const override {
    return {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>"};
  }
  std::vector<ToolCall> parse(std::string_view text, const ToolSet*) const override {
    std::vector<ToolCall> calls;
    size_t name_end = 0;
    while (name_end < text.size() && text[name_end] != ' ' && text[name_end] != '<') ++name_end;
    const size_t message = text.find(kMessage, name_end);
    if (message == std::string_view::npos) return calls;
    const size_t open = tool_text::skip_space(text, message + kMessage.size());
    tool_text::add_json_call(text.substr(0, name_end), text, open, calls);
    return calls;
  }
  const CallEnvelope* envelope() const override { return &envelope_; }

 private:
  CallEnvelope envelope_{
      .head = "", .name_end = ' ', .middle = "<|constrain|>json<|message|>", .single = true};
};

}  // namespace

const ToolFormat& harmony() {
  static const Harmony format;
  return format;
}

}  // namespace ts::tool_formats
