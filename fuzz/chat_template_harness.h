// What one chat-template fuzz input does: the bytes are a Jinja template (a model file's
// tokenizer.chat_template, so untrusted), rendered for a small conversation with tools. The
// parser refuses it with a one-line Unsupported error or builds it; the render ends with text or
// a one-line Input error, within the limits given (time through max_steps, memory through
// max_output and the nesting limits). Shared by the libFuzzer target and the replay test.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "parser_harness.h"
#include "text/jinja/json_value.h"
#include "text/jinja/template.h"

namespace ts::fuzz {

inline const jinja::Dict& chat_template_context() {
  static const jinja::Value context = jinja::from_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>"
  })"));
  return context.as_dict();
}

inline void expect_one_line(const Error& e, ErrorKind kind, const char* stage) {
  if (e.kind() != kind || std::string_view(e.what()).find('\n') != std::string_view::npos)
    violated(std::string(stage) + " failed with the wrong kind of error: " + e.what());
}

inline bool check_chat_template(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<jinja::Template> t;
  try {
    t = std::make_unique<jinja::Template>(source);
  } catch (const Error& e) {
    expect_one_line(e, ErrorKind::Unsupported, "parsing");
    return false;
  }
  jinja::RenderOptions options;
  options.limits.max_output = size_t{1} << 20;
  options.limits.max_steps = 50000;
  options.now = 0;
  try {
    const std::string text = t->render(chat_template_context(), options);
    if (text.size() > options.limits.max_output) violated("the output passed max_output");
  } catch (const Error& e) {
    expect_one_line(e, ErrorKind::Input, "rendering");
    return false;
  }
  return true;
}

}  // namespace ts::fuzz
