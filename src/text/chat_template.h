// Built-in chat formats. A model's Jinja chat template is not executed: it is recognised by its
// distinctive markers and mapped to one of the formats below, which are written out here. A
// template we do not recognise is an error that says how to choose a format by name; it is never
// silently replaced by another format.
//
// apply() writes the conversation without the leading BOS: encode the result with
// add_bos = tokenizer.add_bos() and parse_special = true, so the markers become their tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ts {

class GgufFile;

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant" (ChatML accepts any role name)
  std::string content;
};

enum class ChatFormat {
  ChatML,   // <|im_start|>role\n...<|im_end|> (Qwen, SmolLM)
  Llama3,   // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  Llama2,   // [INST] <<SYS>>...<</SYS>> ... [/INST] answer </s>
  Mistral,  // [INST] ... [/INST]answer</s>, the system prompt before the first user message
  Gemma,    // <start_of_turn>user\n...<end_of_turn> (the assistant is "model")
  Raw,      // contents joined by one space, no markers: for base models without a chat format
};

class ChatTemplate {
 public:
  explicit ChatTemplate(ChatFormat format) : format_(format) {}

  // "chatml", "llama3", "llama2", "mistral", "gemma", "raw"; anything else is a Usage error.
  static ChatTemplate by_name(std::string_view name);
  // The format a Jinja template source is written for; Unsupported error when not recognised.
  static ChatTemplate recognise(std::string_view source);

  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  ChatFormat format() const { return format_; }
  const char* name() const;

 private:
  ChatFormat format_;
};

// Chooses the format: an explicit name wins; else the model's template source; else the
// family's own format (qwen2 / qwen3 / qwen3moe: ChatML, gemma3: Gemma); else an error naming
// the choices. `model` names the model in messages.
ChatTemplate select_chat_template(std::string_view explicit_name, std::string_view template_source,
                                  std::string_view family, const std::string& model);

// The template source a model file carries ("" when none): GGUF `tokenizer.chat_template`;
// in a Hugging Face directory chat_template.jinja or tokenizer_config.json's "chat_template".
std::string gguf_chat_template(const GgufFile& file);
std::string hf_chat_template(const std::string& dir);

}  // namespace ts
