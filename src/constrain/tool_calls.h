// Tool calling. The tools of a request, and the calls a model writes. By default in the Hermes
// format that Qwen 2.5 / 3 and many fine-tunes are trained on (the tools listed in the system
// prompt inside <tools></tools>, a call written
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// ); a ToolSet bound to another family's format (constrain/tool_format.h) reads and constrains that
// family's spelling instead. A call is generated under ToolCallPrefix, which holds it to the
// format's envelope, a declared name and that tool's parameter schema, byte by byte (the same
// promise as SchemaPrefix: an accepted prefix can always be completed), so every call the server
// returns parses and fits its schema.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/byte_recognizer.h"
#include "constrain/json_schema.h"
#include "constrain/schema_prefix.h"
#include "constrain/tool_format.h"

namespace ts {

struct Tool {
  std::string name;
  std::string description;
  nlohmann::json parameters;  // the JSON Schema as given
  std::shared_ptr<const JsonSchema> schema;
};

// What marks a call in the generated text; what the prompt lists the tools in.
inline constexpr std::string_view kToolCallOpen = "<tool_call>";

class ToolSet {
 public:
  // Sorts by name; an Input error for a duplicate name. `parallel`: an answer may hold several
  // calls (OpenAI's parallel_tool_calls), else one.
  explicit ToolSet(std::vector<Tool> tools, bool parallel = true);

  // The system prompt's section that lists the tools and says how to call them (in the Hermes
  // form, or in the bound format's: format_system_block, for a template that writes calls in its
  // family's format but does not list the tools, as DeepSeek's).
  std::string system_block() const;
  std::string format_system_block() const;
  const std::vector<Tool>& tools() const { return tools_; }
  bool parallel() const { return parallel_; }
  // Each name as the call writes it, followed by the byte that ends it in the format's envelope
  // ("get_weather\"" in Hermes), in byte order; quoted_tool(i): the tools() index of the i-th.
  const std::vector<std::string>& quoted_names() const { return quoted_; }
  size_t quoted_tool(size_t i) const { return quoted_tool_[i]; }
  // The same set reduced to one tool (tool_choice naming it); an Input error if it is not here.
  std::shared_ptr<const ToolSet> only(const std::string& name) const;
  // The same set, its calls read and constrained in `format`.
  std::shared_ptr<const ToolSet> in_format(const ToolFormat& format) const;
  const ToolFormat& format() const { return *format_; }
  // The envelope a call is held to: the format's, Hermes' for a format without one.
  const CallEnvelope& envelope() const;
  // Whether an answer may hold several calls: the request allows it and the format has a way to.
  bool several() const { return parallel_ && !envelope().single; }

 private:
  // Each tool as a line of its function JSON, python-style (the blocks above list them so).
  std::string functions_listed() const;
  void name_calls();

  std::vector<Tool> tools_;
  std::vector<std::string> quoted_;
  std::vector<size_t> quoted_tool_;
  bool parallel_ = true;
  const ToolFormat* format_;
};

// One call read back from the text generated under ToolCallPrefix.
struct ToolCall {
  std::string name;
  std::string arguments;  // compact JSON text of the arguments object
};
ToolCall parse_tool_call(std::string_view text);
// Every whole call of a text generated under ToolCallPrefix (calls closed by </tool_call>, or one
// that ends the text).
std::vector<ToolCall> parse_tool_calls(std::string_view text);

// The text of a call as the model writes it (for an assistant message that made calls).
std::string tool_call_text(const std::string& name, const std::string& arguments_json);

class ToolCallPrefix : public ByteRecognizer<ToolCallPrefix> {
 public:
  ToolCallPrefix() = default;  // refuses everything; assign a constructed one
  explicit ToolCallPrefix(const ToolSet* tools) : tools_(tools), env_(&tools->envelope()) {
    enter(Phase::Start);
  }

  // The same contract as JsonPrefix's. complete(): the calls so far are whole, and the answer may
  // end here; closed(): nothing can follow (one call, not parallel).
  bool feed(uint8_t c);
  bool complete() const {
    return phase_ == Phase::Done || (phase_ == Phase::Next && offset_ == 0 && env_->end.empty());
  }
  bool closed() const { return phase_ == Phase::Done; }
  uint32_t plain_string_room() const {
    return phase_ == Phase::Arguments ? arguments_.plain_string_room() : 0;
  }

 private:
  // The envelope's parts in order (constrain/tool_format.h); an empty literal is passed over.
  enum class Phase : uint8_t {
    Start,      // the envelope's start, once
    Lead,       // whitespace before the head (a line break, some indentation), or its first byte
    Head,       // {"name": "
    Name,       // one of the quoted names
    Middle,     // , "arguments":
    Arguments,  // the tool's parameters object
    Tail,       // }
    Close,      // several calls: \n</tool_call>
    Next,       // several calls: the end, or what leads to another call
    End,        // one call: the end
    Done,
  };
  // Moves to `phase`, passing over it (and the ones after) while its literal is empty.
  void enter(Phase phase);
  // Feeds a literal phase's byte; at its end, enters `after`.
  bool literal(std::string_view text, uint8_t c, Phase after);

  const ToolSet* tools_ = nullptr;
  const CallEnvelope* env_ = nullptr;
  Phase phase_ = Phase::Start;
  uint8_t lead_spaces_ = 0;
  bool lead_break_ = false;
  uint32_t offset_ = 0;  // bytes matched of the current literal or name
  // Next: whether the bytes so far still match the end, and the way to another call.
  bool next_end_ = true, next_call_ = true;
  uint32_t lo_ = 0, hi_ = 0;
  SchemaPrefix arguments_;
};

}  // namespace ts
