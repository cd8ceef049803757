#include "constrain/tool_format.h"

#include "constrain/tool_formats/formats.h"

namespace ts {
namespace {

bool has(std::string_view source, std::string_view marker) {
  return source.find(marker) != std::string_view::npos;
}

}  // namespace

// By the markers a template writes for an assistant message's calls. The more specific spellings
// are tested first: Qwen3-Coder's XML sits inside <tool_call> too, and gpt-oss's template also
// holds "<|start|>" spellings that no other format uses.
const ToolFormat& tool_format_for_template(std::string_view source) {
  if (has(source, "<|channel|>") && has(source, "functions.")) return tool_formats::harmony();
  if (has(source, "<function=") && has(source, "<parameter=")) return tool_formats::qwen3_xml();
  if (has(source, "<｜tool▁call▁begin｜>"))
    return has(source, "```json") ? tool_formats::deepseek_v3() : tool_formats::deepseek_v3_1();
  if (has(source, "[TOOL_CALLS]"))
    return has(source, "[ARGS]") ? tool_formats::mistral() : tool_formats::mistral_nemo();
  if (has(source, "<tool_call>")) return tool_formats::hermes();
  if (has(source, "<|start_header_id|>") && has(source, "\"parameters\": "))
    return tool_formats::llama3();
  return tool_formats::hermes();
}

std::vector<const ToolFormat*> all_tool_formats() {
  return {&tool_formats::hermes(),        &tool_formats::qwen3_xml(), &tool_formats::mistral(),
          &tool_formats::mistral_nemo(),  &tool_formats::llama3(),    &tool_formats::deepseek_v3(),
          &tool_formats::deepseek_v3_1(), &tool_formats::harmony()};
}

const ToolFormat* tool_format_named(std::string_view name) {
  for (const ToolFormat* f : all_tool_formats())
    if (f->name() == name) return f;
  return nullptr;
}

const ToolFormat& hermes_tool_format() {
  return tool_formats::hermes();
}

}  // namespace ts
