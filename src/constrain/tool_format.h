// How a model family writes tool calls in its answers. Each family was trained on its own
// spelling (Hermes' <tool_call>{json}</tool_call>, Mistral's [TOOL_CALLS]name[ARGS]{json},
// DeepSeek's <｜tool▁call▁begin｜> tokens, gpt-oss's commentary channel, Qwen3-Coder's XML, a
// bare Llama 3 JSON object); the server must read the one the model's template teaches, or the
// calls come back as plain text. One ToolFormat per family (constrain/tool_formats/), chosen from
// the template source by the markers its tool-call section writes (tool_format_for_template).
//
// Every format has an opening marker: while the model writes freely it is a stop string, and
// what follows it is the call (or calls). Formats whose arguments are one JSON object also give
// a CallEnvelope, the fixed text around each call, which ToolCallPrefix holds a generated call
// to (a declared name, then that tool's schema). A format without one is parsed but not
// constrained (docs/SERVER.md says which, and why).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ts {

struct ToolCall;
class ToolSet;

// The literal text around each call of a format whose arguments are one JSON object:
//   start [lead] head NAME name_end middle {ARGUMENTS} tail ( close (next [lead] head ...)* end )
// Names are letters, digits, '_' and '-', so `name_end` (none of those) ends one unambiguously.
struct CallEnvelope {
  std::string_view start = {};   // after the opening marker, before the first call
  std::string_view head = {};    // before each call's name
  char name_end = '"';           // the byte right after a name
  std::string_view middle = {};  // after name_end, before the arguments object
  std::string_view tail = {};    // after the arguments object
  std::string_view close = {};   // after a call's tail when several calls may follow (parallel)
  std::string_view next = {};    // between one call's close and the next head ("" : head directly)
  std::string_view end = {};     // after the last call ("" : the calls may end after any close)
  bool lead_space = false;       // a line break and a little indentation may come before a head
  bool single = false;           // the family writes one call per answer, whatever the request says
};

class ToolFormat {
 public:
  virtual ~ToolFormat() = default;
  // "hermes", "qwen3_xml", "mistral", "mistral_nemo", "llama3", "deepseek_v3", "deepseek_v3_1",
  // "harmony".
  virtual std::string_view name() const = 0;
  // The text that opens the calls in an answer.
  virtual std::string_view open() const = 0;
  // What the prompt of a required call ends with, so that the model writes only the call: the
  // marker, and what the family writes before or after it.
  virtual std::string forced_opening() const { return std::string(open()); }
  // Whether the opening marker is the beginning of the first call's envelope (Llama 3's bare
  // JSON): then the constraint reads it too.
  virtual bool open_in_call() const { return false; }
  // Special tokens this format's calls are spelled with: the server shows them as their text so
  // that the calls can be read (and constrained) at all; every other control token stays hidden.
  virtual std::vector<std::string> preserved_tokens() const { return {}; }
  // Every call of `text`, the answer's text from the opening marker on (the marker excluded).
  // `tools` (may be null) are the request's: a format whose values are not JSON reads them by
  // their declared types. Model output is untrusted: a call that does not read is left out,
  // nothing throws.
  virtual std::vector<ToolCall> parse(std::string_view text, const ToolSet* tools) const = 0;
  // The envelope of a constrained call; null when the format is not constrained.
  virtual const CallEnvelope* envelope() const { return nullptr; }
};

// The format a chat template's source teaches (Hermes when it teaches none it knows: the server
// then describes the tools in the Hermes form itself).
const ToolFormat& tool_format_for_template(std::string_view source);
// By name(); null when there is none of that name.
const ToolFormat* tool_format_named(std::string_view name);
const ToolFormat& hermes_tool_format();
// Every format, for tests and the fuzzer.
std::vector<const ToolFormat*> all_tool_formats();

}  // namespace ts
