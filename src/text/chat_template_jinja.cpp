// ChatTemplate's Jinja side: the variables a model's template renders, as transformers'
// apply_chat_template passes them (messages, tools, add_generation_prompt, bos_token, eos_token
// and the template kwargs as variables of their own).
#include "core/error.h"
#include "text/chat_template.h"
#include "text/harmony.h"
#include "text/jinja/json_value.h"
#include "text/jinja/template.h"

namespace ts {
namespace {

// `harmony`: gpt-oss's template reads an assistant turn's analysis from "thinking", where
// OpenAI clients send it as reasoning_content (as llama.cpp maps it).
jinja::Value message_value(const ChatMessage& m, bool harmony) {
  jinja::Dict d;
  d.set("role", jinja::Value(m.role));
  d.set("content", jinja::Value(m.content));
  if (!m.reasoning_content.empty()) d.set("reasoning_content", jinja::Value(m.reasoning_content));
  if (harmony && !m.reasoning_content.empty()) d.set("thinking", jinja::Value(m.reasoning_content));
  if (m.tool_calls.is_array()) d.set("tool_calls", jinja::from_json(m.tool_calls));
  if (!m.tool_call_id.empty()) d.set("tool_call_id", jinja::Value(m.tool_call_id));
  if (!m.name.empty()) d.set("name", jinja::Value(m.name));
  return jinja::Value(std::move(d));
}

}  // namespace

ChatTemplate ChatTemplate::jinja(std::string_view source, const TemplateTokens& tokens) {
  ChatTemplate t(ChatFormat::Jinja);
  t.jinja_ = std::make_shared<const jinja::Template>(source);
  t.tokens_ = tokens;
  // A template that writes calls in a format the server reads lists the tools itself.
  t.tool_format_ = &tool_format_for_template(source);
  t.renders_tools_ = source.find("tools") != std::string_view::npos &&
                     (t.tool_format_ != &hermes_tool_format() ||
                      source.find("<tool_call>") != std::string_view::npos);
  t.thinks_ = source.find("</think>") != std::string_view::npos;
  t.harmony_ = template_writes_harmony(source);
  return t;
}

std::string ChatTemplate::render_jinja(const std::vector<ChatMessage>& messages,
                                       const nlohmann::ordered_json& tools,
                                       const nlohmann::ordered_json& kwargs,
                                       bool add_generation_prompt) const {
  jinja::Dict context;
  if (kwargs.is_object())
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it)
      context.set(jinja::Value(it.key()), jinja::from_json(it.value()));
  jinja::List list;
  for (const ChatMessage& m : messages) list.push_back(message_value(m, harmony_));
  context.set("messages", jinja::Value(std::move(list)));
  if (tools.is_array()) context.set("tools", jinja::from_json(tools));
  context.set("add_generation_prompt", jinja::Value(add_generation_prompt));
  context.set("bos_token", jinja::Value(tokens_.bos));
  context.set("eos_token", jinja::Value(tokens_.eos));
  std::string text = jinja_->render(context);
  const std::string& bos = tokens_.bos;
  if (tokens_.add_bos && !bos.empty() && text.compare(0, bos.size(), bos) == 0)
    text.erase(0, bos.size());
  return text;
}

}  // namespace ts
