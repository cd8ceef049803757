// Mistral's two spellings. Tokenizer v11 and later (Mistral Small 3.2, Devstral, Ministral 3):
//   [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{...}
// (a [CALL_ID]id may sit before [ARGS] in history). Earlier ones (Mistral Nemo, v3):
//   [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "..."}]
// [TOOL_CALLS] and [ARGS] are control tokens, shown so that the calls can be read.
#include "text/tool_formats/call_text.h"
#include "text/tool_formats/formats.h"

namespace ts::tool_formats {
namespace {

constexpr std::string_view kCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";

class Mistral final : public ToolFormat {
 public:
  std::string_view name() const override { return "mistral"; }
  std::string_view open() const override { return kCalls; }
  std::vector<std::string> preserved_tokens() const override {
    return {std::string(kCalls), std::string(kArgs), "[CALL_ID]"};
  }
  std::vector<ToolCall> parse(std::string_view text, const ToolSet*) const override {
    std::vector<ToolCall> calls;
    size_t at = 0;
    while (at < text.size()) {
      size_t stop = text.find(kCalls, at);
      if (stop == std::string_view::npos) stop = text.size();
      const std::string_view one = text.substr(at, stop - at);
      at = stop + kCalls.size();
      const size_t args = one.find(kArgs);
      if (args == std::string_view::npos) continue;
      std::string_view name = one.substr(0, std::min(one.find('['), args));
      while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
      tool_text::add_json_call(name, one, args + kArgs.size(), calls);
    }
    return calls;
  }
  const CallEnvelope* envelope() const override { return &envelope_; }

 private:
  // The name ends at [ARGS]'s first byte.
  CallEnvelope envelope_{.head = "", .name_end = '[', .middle = "ARGS]", .next = kCalls};
};

class MistralNemo final : public ToolFormat {
 public:
  std::string_view name() const override { return "mistral_nemo"; }
  std::string_view open() const override { return kCalls; }
  std::vector<std::string> preserved_tokens() const override { return {std::string(kCalls)}; }
  std::vector<ToolCall> parse(std::string_view text, const ToolSet*) const override {
    return tool_text::json_object_calls(text, "arguments");
  }
  const CallEnvelope* envelope() const override { return &envelope_; }

 private:
  CallEnvelope envelope_{.start = "[",
                         .head = R"({"name": ")",
                         .name_end = '"',
                         .middle = R"(, "arguments": )",
                         .tail = "}",
                         .next = ", ",
                         .end = "]"};
};

}  // namespace

const ToolFormat& mistral() {
  static const Mistral format;
  return format;
}

const ToolFormat& mistral_nemo() {
  static const MistralNemo format;
  return format;
}

}  // namespace ts::tool_formats
