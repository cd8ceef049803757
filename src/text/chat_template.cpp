#include "text/chat_template.h"

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json_nesting.h"
#include "formats/gguf.h"

namespace ts {
namespace {

constexpr const char* kNames = "chatml, llama3, llama2, mistral, gemma, raw, or a FILE.jinja";

bool has(std::string_view s, std::string_view marker) {
  return s.find(marker) != std::string_view::npos;
}

// The official Llama 3 and Gemma templates strip each message.
std::string trim(std::string_view s) {
  const auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t b = 0;
  size_t e = s.size();
  while (b < e && ws(s[b])) ++b;
  while (e > b && ws(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

[[noreturn]] void bad_role(const char* format, const std::string& role) {
  fail(ErrorKind::Input, std::string(format) + " chat format: unknown message role '" + role +
                             "' (system, user, assistant)");
}

std::string apply_chatml(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out;
  for (const ChatMessage& m : msgs)
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string apply_llama3(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out;
  for (const ChatMessage& m : msgs) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") bad_role("llama3", m.role);
    out +=
        "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// The system prompt (if any) and the remaining messages, which must alternate user/assistant
// starting with the user (the [INST] and Gemma formats have no other shape).
std::pair<std::string, std::vector<const ChatMessage*>> split_system(
    const std::vector<ChatMessage>& msgs, const char* format) {
  std::string system;
  std::vector<const ChatMessage*> turns;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (m.role == "system") {
      if (i != 0)
        fail(ErrorKind::Input,
             std::string(format) + " chat format: a system message must come first");
      system = m.content;
      continue;
    }
    if (m.role != "user" && m.role != "assistant") bad_role(format, m.role);
    const char* expected = turns.size() % 2 == 0 ? "user" : "assistant";
    if (m.role != expected) {
      fail(ErrorKind::Input, std::string(format) +
                                 " chat format: messages must alternate user/assistant, starting "
                                 "with user (message " +
                                 std::to_string(i) + " is " + m.role + ")");
    }
    turns.push_back(&m);
  }
  return {system, turns};
}

std::string apply_llama2(const std::vector<ChatMessage>& msgs) {
  const auto [system, turns] = split_system(msgs, "llama2");
  std::string out;
  for (size_t i = 0; i < turns.size(); ++i) {
    if (i % 2 == 0) {
      // As Meta's template: the system block joins the first user message, then the whole is
      // stripped (so the system text itself keeps its own spacing).
      std::string content = turns[i]->content;
      if (i == 0 && !system.empty()) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
      if (i > 0) out += "<s>";
      out += "[INST] " + trim(content) + " [/INST]";
    } else {
      out += " " + trim(turns[i]->content) + " </s>";
    }
  }
  return out;
}

std::string apply_mistral(const std::vector<ChatMessage>& msgs) {
  const auto [system, turns] = split_system(msgs, "mistral");
  std::string out;
  for (size_t i = 0; i < turns.size(); ++i) {
    if (i % 2 == 0) {
      out += "[INST] ";
      if (i == 0 && !system.empty()) out += system + "\n\n";
      out += turns[i]->content + " [/INST]";
    } else {
      out += turns[i]->content + "</s>";
    }
  }
  return out;
}

std::string apply_gemma(const std::vector<ChatMessage>& msgs, bool gen) {
  const auto [system, turns] = split_system(msgs, "gemma");
  std::string out;
  for (size_t i = 0; i < turns.size(); ++i) {
    const bool user = i % 2 == 0;
    out += user ? "<start_of_turn>user\n" : "<start_of_turn>model\n";
    // Gemma has no system role: its template puts the system text before the first user turn.
    if (i == 0 && !system.empty()) out += system + "\n\n";
    out += trim(turns[i]->content) + "<end_of_turn>\n";
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

std::string apply_raw(const std::vector<ChatMessage>& msgs) {
  std::string out;
  for (const ChatMessage& m : msgs) {
    if (!out.empty()) out += ' ';
    out += m.content;
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

ChatTemplate ChatTemplate::by_name(std::string_view name) {
  if (name == "chatml") return ChatTemplate(ChatFormat::ChatML);
  if (name == "llama3") return ChatTemplate(ChatFormat::Llama3);
  if (name == "llama2") return ChatTemplate(ChatFormat::Llama2);
  if (name == "mistral") return ChatTemplate(ChatFormat::Mistral);
  if (name == "gemma") return ChatTemplate(ChatFormat::Gemma);
  if (name == "raw") return ChatTemplate(ChatFormat::Raw);
  fail(ErrorKind::Usage,
       "unknown chat template '" + std::string(name) + "' (known: " + kNames + ")");
}

ChatTemplate ChatTemplate::recognise(std::string_view src) {
  if (has(src, "<|im_start|>")) return ChatTemplate(ChatFormat::ChatML);
  if (has(src, "<|start_header_id|>") && has(src, "<|eot_id|>"))
    return ChatTemplate(ChatFormat::Llama3);
  if (has(src, "<start_of_turn>")) return ChatTemplate(ChatFormat::Gemma);
  if (has(src, "[INST]") && has(src, "<<SYS>>")) return ChatTemplate(ChatFormat::Llama2);
  // Mistral v0.1-v0.3 write "[INST] text [/INST]"; the later Tekken / v7 formats (no spaces,
  // [SYSTEM_PROMPT]) are a different format and fall through to the error.
  if (has(src, "[INST] ") && has(src, " [/INST]") && !has(src, "[SYSTEM_PROMPT]")) {
    return ChatTemplate(ChatFormat::Mistral);
  }
  std::string head(src.substr(0, 60));
  for (char& c : head)
    if (c == '\n') c = ' ';
  fail(ErrorKind::Unsupported, "chat template not recognised (it begins '" + head +
                                   "...'); choose a format with --chat-template NAME (" + kNames +
                                   ")");
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) const {
  ChatOptions options;
  options.add_generation_prompt = add_generation_prompt;
  return apply(messages, options);
}

namespace {

// transformers' continue_final_message: the render cut right after the final message's text, so
// that the model goes on writing it.
std::string cut_after_final(const std::string& text, const std::string& final_content) {
  const std::string stripped = trim(final_content);
  const size_t at = text.rfind(stripped);
  if (at == std::string::npos)
    fail(ErrorKind::Input,
         "the final assistant message to continue does not appear in the rendered chat template");
  // Trailing spaces the template kept stay in the prompt; ones it trimmed stay out.
  const size_t first = final_content.find_first_not_of(" \t\n\r");
  const std::string_view lstripped = std::string_view(final_content).substr(first);
  if (text.compare(at, lstripped.size(), lstripped) == 0)
    return text.substr(0, at + lstripped.size());
  return text.substr(0, at + stripped.size());
}

}  // namespace

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                const ChatOptions& options) const {
  const bool prefill = options.continue_final_message && !messages.empty() &&
                       messages.back().role == "assistant" &&
                       !messages.back().tool_calls.is_array();
  if (prefill && trim(messages.back().content).empty()) {
    // Nothing written yet: the turn simply opens.
    ChatOptions o = options;
    o.add_generation_prompt = true;
    o.continue_final_message = false;
    return apply({messages.begin(), messages.end() - 1}, o);
  }
  const bool gen = options.add_generation_prompt && !prefill;
  std::string text = format_ == ChatFormat::Jinja
                         ? render_jinja(messages, options.tools, options.kwargs, gen)
                         : apply_builtin(messages, gen);
  return prefill ? cut_after_final(text, messages.back().content) : text;
}

std::string ChatTemplate::apply_builtin(const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt) const {
  switch (format_) {
    case ChatFormat::Jinja:
      break;  // apply() renders it
    case ChatFormat::ChatML:
      return apply_chatml(messages, add_generation_prompt);
    case ChatFormat::Llama3:
      return apply_llama3(messages, add_generation_prompt);
    // In the [INST] formats the prompt already ends where the answer starts.
    case ChatFormat::Llama2:
      return apply_llama2(messages);
    case ChatFormat::Mistral:
      return apply_mistral(messages);
    case ChatFormat::Gemma:
      return apply_gemma(messages, add_generation_prompt);
    case ChatFormat::Raw:
      return apply_raw(messages);
  }
  return "";
}

const char* ChatTemplate::name() const {
  switch (format_) {
    case ChatFormat::ChatML:
      return "chatml";
    case ChatFormat::Llama3:
      return "llama3";
    case ChatFormat::Llama2:
      return "llama2";
    case ChatFormat::Mistral:
      return "mistral";
    case ChatFormat::Gemma:
      return "gemma";
    case ChatFormat::Raw:
      return "raw";
    case ChatFormat::Jinja:
      return "jinja";
  }
  return "?";
}

std::string ChatTemplate::describe() const {
  if (format_ == ChatFormat::Jinja) return origin_ + " (jinja)";
  if (fallback_reason_.empty()) return name();
  return std::string(name()) + " (" + fallback_reason_ + ")";
}

ChatTemplate select_chat_template(std::string_view explicit_name, std::string_view template_source,
                                  std::string_view family, const std::string& model,
                                  const TemplateTokens& tokens) {
  if (!explicit_name.empty()) {
    const std::string name(explicit_name);
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".jinja") == 0) {
      if (!is_file(name)) fail(ErrorKind::Usage, "--chat-template: no file " + name);
      ChatTemplate t = ChatTemplate::jinja(read_text(name), tokens);
      t.set_origin(name);
      return t;
    }
    return ChatTemplate::by_name(explicit_name);
  }
  if (!template_source.empty()) {
    try {
      return ChatTemplate::jinja(template_source, tokens);
    } catch (const Error& jinja_error) {
      // A template the engine cannot read: the built-in format its markers name, if any.
      try {
        ChatTemplate t = ChatTemplate::recognise(template_source);
        t.set_fallback_reason(std::string("the model's template was not run: ") +
                              jinja_error.what());
        return t;
      } catch (const Error&) {
        throw jinja_error;
      }
    }
  }
  if (family == "qwen2" || family == "qwen3" || family == "qwen3moe" || family == "qwen3vl" ||
      family == "qwen3vlmoe")
    return ChatTemplate(ChatFormat::ChatML);
  if (family == "gemma3") return ChatTemplate(ChatFormat::Gemma);
  fail(ErrorKind::Usage, model + " has no chat template and family '" + std::string(family) +
                             "' has no single chat format; choose one with --chat-template NAME (" +
                             kNames + ")");
}

std::string gguf_chat_template(const GgufFile& file) {
  return file.get_string("tokenizer.chat_template").value_or("");
}

std::string hf_chat_template(const std::string& dir) {
  const std::string jinja = dir + "/chat_template.jinja";
  if (is_file(jinja)) return read_text(jinja);
  const std::string config_path = dir + "/tokenizer_config.json";
  if (!is_file(config_path)) return "";
  nlohmann::json config;
  try {
    const std::string text = read_text(config_path);
    require_json_nesting(text, config_path, ErrorKind::Model);
    config = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::Model, config_path + ": invalid JSON: " + e.what());
  }
  if (!config.contains("chat_template")) return "";
  const nlohmann::json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  // A list of named templates: the one named "default" is the chat template.
  if (t.is_array())
    for (const nlohmann::json& e : t)
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
          e["template"].is_string())
        return e["template"].get<std::string>();
  return "";
}

}  // namespace ts
