#include "server/responses_request.h"

#include <map>
#include <set>

#include "core/error.h"
#include "server/json_fields.h"

namespace ts::server {
namespace {

using nlohmann::json;

// The text of a message's content: a string, or a list of text parts (input_text, output_text).
std::string content_text(const json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(field, "must be a string or a list of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string f = field + "[" + std::to_string(i) + "]";
    const json* type = part.is_object() ? get(part, "type") : nullptr;
    if (type == nullptr || !type->is_string()) bad(f + ".type", "must be a string");
    const std::string t = type->get<std::string>();
    if (t != "input_text" && t != "output_text" && t != "text")
      bad(f + ".type", "'" + t + "' is not supported: this server's models read text only");
    const json* s = get(part, "text");
    if (s == nullptr || !s->is_string()) bad(f + ".text", "must be a string");
    text += s->get<std::string>();
  }
  return text;
}

std::string required_string(const json& item, const char* name, const std::string& field) {
  const json* v = get(item, name);
  if (v == nullptr || !v->is_string()) bad(field + "." + name, "must be a string");
  return v->get<std::string>();
}

// Input items as chat messages: messages, the model's function calls (consecutive ones in one
// assistant message, after its text) and their outputs as tool messages. Reasoning items are left
// out: templates drop earlier turns' thinking.
json input_messages(const json& body) {
  const json* input = get(body, "input");
  if (input == nullptr) bad("input", "is required");
  json out = json::array();
  if (input->is_string()) {
    out.push_back({{"role", "user"}, {"content", *input}});
    return out;
  }
  if (!input->is_array() || input->empty())
    bad("input", "must be a string or a non-empty list of items");
  for (size_t i = 0; i < input->size(); ++i) {
    const json& item = (*input)[i];
    const std::string field = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) bad(field, "must be an object");
    const json* type = get(item, "type");
    if (type != nullptr && !type->is_string()) bad(field + ".type", "must be a string");
    const std::string t = type == nullptr ? "message" : type->get<std::string>();
    if (t == "message") {
      const std::string role = required_string(item, "role", field);
      const json* content = get(item, "content");
      if (content == nullptr) bad(field + ".content", "is required");
      out.push_back({{"role", role}, {"content", content_text(*content, field + ".content")}});
    } else if (t == "function_call") {
      json call = {{"id", required_string(item, "call_id", field)},
                   {"type", "function"},
                   {"function",
                    {{"name", required_string(item, "name", field)},
                     {"arguments", required_string(item, "arguments", field)}}}};
      if (out.empty() || out.back()["role"] != "assistant")
        out.push_back({{"role", "assistant"}, {"content", ""}});
      out.back()["tool_calls"].push_back(std::move(call));
    } else if (t == "function_call_output") {
      const json* output = get(item, "output");
      if (output == nullptr) bad(field + ".output", "is required");
      out.push_back({{"role", "tool"},
                     {"tool_call_id", required_string(item, "call_id", field)},
                     {"content", content_text(*output, field + ".output")}});
    } else if (t != "reasoning") {
      bad(field + ".type",
          "'" + t + "' is not supported (message, function_call, function_call_output, reasoning)");
    }
  }
  return out;
}

// Function tools, {"type": "function", "name", "description", "parameters", "strict"}, in the
// chat-completions form that nests them under "function".
json chat_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "must be a list");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string field = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) bad(field, "must be an object");
    const std::string type = string(t, "type");
    if (type != "function")
      bad(field + ".type", "must be \"function\": this server runs no built-in tools");
    json fn = json::object();
    for (const auto& [k, v] : t.items())
      if (k != "type") fn[k] = v;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json chat_tool_choice(const json& choice) {
  if (choice.is_string()) return choice;
  if (!choice.is_object() || string(choice, "type") != "function")
    bad("tool_choice",
        "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\"}");
  return {{"type", "function"}, {"function", {{"name", string(choice, "name")}}}};
}

// text.format: {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", "name",
// "schema", "strict"}.
void read_text_format(const json& body, json& out) {
  const json* text = get(body, "text");
  if (text == nullptr) return;
  if (!text->is_object()) bad("text", "must be an object");
  const json* format = get(*text, "format");
  if (format == nullptr) return;
  if (!format->is_object()) bad("text.format", "must be an object");
  const std::string type = string(*format, "type");
  if (type == "text") return;
  if (type == "json_object") {
    out["response_format"] = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    json spec = json::object();
    for (const char* k : {"name", "schema", "strict", "description"})
      if (const json* v = get(*format, k); v != nullptr) spec[k] = *v;
    out["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
  } else {
    bad("text.format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  }
}

// The Responses name of a chat-completions field an error names.
std::string responses_field(const std::string& chat) {
  static const std::map<std::string, std::string> m = {{"max_tokens", "max_output_tokens"},
                                                       {"response_format", "text.format"},
                                                       {"messages", "input"},
                                                       {"reasoning_effort", "reasoning.effort"},
                                                       {"chat_template_kwargs", "reasoning"}};
  const auto it = m.find(chat);
  return it == m.end() ? chat : it->second;
}

ApiRequest parse_rewritten(const json& chat) {
  try {
    return parse_api_request(ApiKind::Chat, chat);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.size() < 2 || msg[0] != '\'') throw;
    const size_t close = msg.find('\'', 1);
    if (close == std::string::npos) throw;
    const std::string field = msg.substr(1, close - 1);
    const size_t cut = field.find_first_of(".[");
    std::string rest = cut == std::string::npos ? "" : field.substr(cut);
    const std::string head = field.substr(0, cut);
    // tools[i].function.x is tools[i].x in the flat form.
    if (head == "tools") {
      const size_t fn = rest.find(".function");
      if (fn != std::string::npos) rest.erase(fn, 9);
    }
    fail(ErrorKind::Input, "'" + responses_field(head) + rest + "'" + msg.substr(close + 1));
  }
}

}  // namespace

std::string previous_response_id(const json& body) {
  return string(body, "previous_response_id");
}

ResponsesRequest parse_responses_request(const json& body, const json& prior) {
  static const std::set<std::string> known = {"model",
                                              "input",
                                              "instructions",
                                              "previous_response_id",
                                              "max_output_tokens",
                                              "temperature",
                                              "top_p",
                                              "stream",
                                              "tools",
                                              "tool_choice",
                                              "parallel_tool_calls",
                                              "text",
                                              "reasoning",
                                              "store",
                                              "metadata",
                                              "user",
                                              "truncation",
                                              "include",
                                              "seed",
                                              "service_tier",
                                              "prompt_cache_key",
                                              "safety_identifier",
                                              "stream_options",
                                              "background"};
  for (const auto& [name, value] : body.items())
    if (known.count(name) == 0) bad(name, "is not a field this server implements");
  if (boolean(body, "background", false))
    bad("background", "is not supported: responses are generated while the request waits");
  const std::string truncation = string(body, "truncation");
  if (!truncation.empty() && truncation != "disabled" && truncation != "auto")
    bad("truncation", "must be \"disabled\" or \"auto\"");
  if (const json* m = get(body, "metadata"); m != nullptr && !m->is_object())
    bad("metadata", "must be an object");
  if (const json* inc = get(body, "include"); inc != nullptr && !inc->is_array())
    bad("include", "must be a list");

  ResponsesRequest r;
  r.previous_id = previous_response_id(body);
  r.stream = boolean(body, "stream", false);
  r.store = boolean(body, "store", true);
  r.new_messages = input_messages(body);

  json chat = json::object();
  json messages = json::array();
  const std::string instructions = string(body, "instructions");
  if (!instructions.empty()) messages.push_back({{"role", "system"}, {"content", instructions}});
  for (const json& m : prior) messages.push_back(m);
  for (const json& m : r.new_messages) messages.push_back(m);
  chat["messages"] = std::move(messages);
  for (const char* k : {"model", "temperature", "top_p", "parallel_tool_calls", "seed", "user"})
    if (const json* v = get(body, k); v != nullptr) chat[k] = *v;
  if (const json* v = get(body, "max_output_tokens"); v != nullptr) chat["max_tokens"] = *v;
  if (const json* v = get(body, "tools"); v != nullptr) chat["tools"] = chat_tools(*v);
  if (const json* v = get(body, "tool_choice"); v != nullptr)
    chat["tool_choice"] = chat_tool_choice(*v);
  read_text_format(body, chat);
  if (const json* reasoning = get(body, "reasoning"); reasoning != nullptr) {
    if (!reasoning->is_object()) bad("reasoning", "must be an object");
    std::string effort = string(*reasoning, "effort");
    // "minimal" and "none" ask for the least thinking a template knows: "low".
    if (effort == "minimal" || effort == "none") effort = "low";
    if (!effort.empty()) chat["reasoning_effort"] = effort;
    const std::string summary = string(*reasoning, "summary");
    if (!summary.empty() && summary != "auto" && summary != "concise" && summary != "detailed")
      bad("reasoning.summary", "must be \"auto\", \"concise\" or \"detailed\"");
    r.summary = !summary.empty();
  }
  r.api = parse_rewritten(chat);

  for (const char* k : {"instructions", "max_output_tokens", "previous_response_id", "metadata",
                        "user", "truncation", "text", "reasoning", "tools", "tool_choice",
                        "parallel_tool_calls", "temperature", "top_p"})
    if (const json* v = get(body, k); v != nullptr) r.echo[k] = *v;
  return r;
}

}  // namespace ts::server
