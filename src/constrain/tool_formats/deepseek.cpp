// DeepSeek's tool-call tokens. V3 and R1 (and their distills):
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
//   ```json
//   {"city": "Paris"}
//   ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
// (a line break between two calls); V3.1 drops the type and the code fence:
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city":
//   "Paris"}<｜tool▁call▁end｜>...
// The parser reads both, whichever the template taught.
#include "constrain/tool_formats/call_text.h"
#include "constrain/tool_formats/formats.h"

namespace ts::tool_formats {
namespace {

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kEnd = "<｜tool▁call▁end｜>";

std::vector<ToolCall> parse_deepseek(std::string_view text) {
  std::vector<ToolCall> calls;
  size_t at = 0;
  while ((at = text.find(kBegin, at)) != std::string_view::npos) {
    at += kBegin.size();
    const size_t sep = text.find(kSep, at);
    if (sep == std::string_view::npos) break;
    const std::string_view before = text.substr(at, sep - at);
    size_t body = sep + kSep.size();
    std::string_view name = before;
    // V3: the type before the separator, the name on the rest of its line.
    const size_t brace = text.find('{', body), line = text.find('\n', body);
    if (before == "function" && line < brace && line != std::string_view::npos &&
        tool_text::valid_name(text.substr(body, line - body))) {
      name = text.substr(body, line - body);
      body = line;
    }
    // The arguments are the object after the separator; its strings may hold any marker.
    const size_t open = text.find('{', body), end = text.find(kEnd, body);
    if (open == std::string_view::npos || end < open) {
      at = end == std::string_view::npos ? text.size() : end + kEnd.size();
      continue;
    }
    at = tool_text::add_json_call(name, text, open, calls);
    if (at == std::string_view::npos) break;
  }
  return calls;
}

class DeepSeek final : public ToolFormat {
 public:
  DeepSeek(std::string_view name, CallEnvelope envelope) : name_(name), envelope_(envelope) {}
  std::string_view name() const override { return name_; }
  std::string_view open() const override { return kCallsBegin; }
  std::vector<std::string> preserved_tokens() const override {
    return {std::string(kCallsBegin), std::string(kCallsEnd), std::string(kBegin),
            std::string(kSep), std::string(kEnd)};
  }
  std::vector<ToolCall> parse(std::string_view text, const ToolSet*) const override {
    return parse_deepseek(text);
  }
  const CallEnvelope* envelope() const override { return &envelope_; }

 private:
  std::string_view name_;
  CallEnvelope envelope_;
};

}  // namespace

const ToolFormat& deepseek_v3() {
  // The head spells the type with the separator; the name ends at its line break.
  static const DeepSeek format("deepseek_v3",
                               CallEnvelope{.head = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
                                            .name_end = '\n',
                                            .middle = "```json\n",
                                            .tail = "\n```<｜tool▁call▁end｜>",
                                            .next = "\n",
                                            .end = kCallsEnd});
  return format;
}

const ToolFormat& deepseek_v3_1() {
  // The name ends at the separator's first byte.
  static const DeepSeek format("deepseek_v3_1", CallEnvelope{.head = kBegin,
                                                             .name_end = '<',
                                                             .middle = "｜tool▁sep｜>",
                                                             .tail = kEnd,
                                                             .end = kCallsEnd});
  return format;
}

}  // namespace ts::tool_formats
