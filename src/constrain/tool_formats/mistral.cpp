// Mistral's two spellings. Tokenizer v11 and later (Mistral Small 3.2, Devstral, Ministral 3):
//   [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{...}
// (a [CALL_ID]id may sit before [ARGS] in history). Earlier ones (Mistral Nemo, v3):
//   [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "..."}]
// [TOOL_CALLS] and [ARGS] are control tokens, shown so that the calls can be read.
#include "constrain/tool_formats/call_text.h"
#include "constrain/tool_formats/formats.h"

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
    // Each call is NAME[ARGS]{json} (a [CALL_ID]id may sit before [ARGS]), calls joined by
    // [TOOL_CALLS]; the arguments' strings may hold either marker, so each object is skipped
    // whole before the next call is looked for.
    std::vector<ToolCall> calls;
    size_t at = 0;
    while (at < text.size()) {
      const size_t args = text.find(kArgs, at);
      if (args == std::string_view::npos) break;
      std::string_view name = text.substr(at, args - at);
      if (const size_t marker = name.rfind(kCalls); marker != std::string_view::npos)
        name.remove_prefix(marker + kCalls.size());
      name = name.substr(0, name.find('['));
      while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
      at = tool_text::add_json_call(name, text, args + kArgs.size(), calls);
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
