// How a conversation becomes the prompt text. The model's own Jinja chat template runs when it
// ships one (text/jinja: rendered as transformers renders it); the built-in formats below are for
// models without one, for --chat-template NAME, and for a template the engine cannot read (then
// recognised by its distinctive markers, and an error naming the choices when it is not).
//
// apply() writes the conversation without the leading BOS: encode the result with
// add_bos = tokenizer.add_bos() and parse_special = true, so the markers become their tokens.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/tool_format.h"

namespace ts {

class GgufFile;
namespace jinja {
class Template;
}

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool" (ChatML accepts any role name)
  std::string content;
  // Given to a Jinja template only (the built-in formats have no place for them): an assistant
  // turn's thinking, its calls ([{"id", "type": "function", "function": {"name", "arguments":
  // {...}}}], arguments as an object, as transformers passes them), a tool turn's call id and
  // function name.
  std::string reasoning_content = {};
  nlohmann::ordered_json tool_calls = {};
  std::string tool_call_id = {};
  std::string name = {};
};

// The tokenizer's special tokens as a Jinja template sees them (bos_token, eos_token), and whether
// encoding adds the BOS itself (then a BOS the template writes first is dropped, not doubled).
struct TemplateTokens {
  std::string bos;
  std::string eos;
  bool add_bos = false;
};

// What a template renders besides the messages.
struct ChatOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;  // the request's tool list; null: none
  // Further template variables: chat_template_kwargs (enable_thinking, reasoning_effort, ...).
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  // A conversation that ends with an assistant message is continued (transformers'
  // continue_final_message): the prompt ends inside that message, where its text stops.
  bool continue_final_message = false;
};

enum class ChatFormat {
  ChatML,   // <|im_start|>role\n...<|im_end|> (Qwen, SmolLM)
  Llama3,   // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  Llama2,   // [INST] <<SYS>>...<</SYS>> ... [/INST] answer </s>
  Mistral,  // [INST] ... [/INST]answer</s>, the system prompt before the first user message
  Gemma,    // <start_of_turn>user\n...<end_of_turn> (the assistant is "model")
  Raw,      // contents joined by one space, no markers: for base models without a chat format
  Jinja,    // the model's own template (or a .jinja file given with --chat-template)
};

class ChatTemplate {
 public:
  explicit ChatTemplate(ChatFormat format) : format_(format) {}

  // "chatml", "llama3", "llama2", "mistral", "gemma", "raw"; anything else is a Usage error.
  static ChatTemplate by_name(std::string_view name);
  // The format a Jinja template source is written for; Unsupported error when not recognised.
  static ChatTemplate recognise(std::string_view source);
  // Runs the Jinja template `source` (a syntax error is Unsupported).
  static ChatTemplate jinja(std::string_view source, const TemplateTokens& tokens);

  // A template's raise_exception, or a conversation a built-in format cannot write, is an Input
  // error.
  std::string apply(const std::vector<ChatMessage>& messages, const ChatOptions& options) const;
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  // Whether the template lists `tools` itself and writes calls in a form the server reads
  // (tool_format(): Hermes for Qwen 2.5 / 3, Hermes, SmolLM3; the family's own for Mistral,
  // Llama 3, DeepSeek, Qwen3-Coder, gpt-oss). Otherwise the server describes the tools in the
  // system message itself, in the Hermes form.
  bool renders_tools() const { return renders_tools_; }
  const ToolFormat& tool_format() const { return *tool_format_; }
  // Whether the template writes gpt-oss's harmony channels, which the server splits into
  // reasoning and reply (text/harmony.h).
  bool harmony() const { return harmony_; }
  // Whether the model thinks in <think>...</think> blocks (its template writes them), which the
  // server gives as reasoning_content (text/reasoning.h).
  bool thinks() const { return thinks_; }
  ChatFormat format() const { return format_; }
  // "chatml", ..., "jinja"; with why a model's template was not run, when a built-in format
  // replaced it.
  std::string describe() const;
  const char* name() const;
  // Why the model's template was replaced by a recognised format ("" when it was not).
  void set_fallback_reason(std::string why) { fallback_reason_ = std::move(why); }
  // Where a Jinja template came from, for describe() ("the model's template" unless set).
  void set_origin(std::string origin) { origin_ = std::move(origin); }

 private:
  std::string apply_builtin(const std::vector<ChatMessage>& messages,
                            bool add_generation_prompt) const;
  std::string render_jinja(const std::vector<ChatMessage>& messages,
                           const nlohmann::ordered_json& tools,
                           const nlohmann::ordered_json& kwargs, bool add_generation_prompt) const;

  ChatFormat format_;
  std::shared_ptr<const jinja::Template> jinja_;
  TemplateTokens tokens_;
  bool renders_tools_ = false;
  bool thinks_ = false;
  bool harmony_ = false;
  const ToolFormat* tool_format_ = &hermes_tool_format();
  std::string fallback_reason_;
  std::string origin_ = "the model's template";
};

// Chooses the template: an explicit name (or the path of a .jinja file) wins; else the model's
// template source, run as Jinja (and recognised by its markers when the engine cannot read it);
// else the family's own format (qwen2 / qwen3 / qwen3moe: ChatML, gemma3: Gemma); else an error
// naming the choices. `model` names the model in messages.
ChatTemplate select_chat_template(std::string_view explicit_name, std::string_view template_source,
                                  std::string_view family, const std::string& model,
                                  const TemplateTokens& tokens = {});

// The template source a model file carries ("" when none): GGUF `tokenizer.chat_template`;
// in a Hugging Face directory chat_template.jinja or tokenizer_config.json's "chat_template".
std::string gguf_chat_template(const GgufFile& file);
std::string hf_chat_template(const std::string& dir);

}  // namespace ts
