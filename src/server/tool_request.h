// The tool-calling fields of a chat request (OpenAI's tools, tool_choice, parallel_tool_calls)
// and the tool turns of its messages, read into the Hermes text the model is prompted with
// (constrain/tool_calls.h). A malformed field is an Input error naming it (a 400).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constrain/tool_calls.h"
#include "text/chat_template.h"

namespace ts::server {

struct ToolRequest {
  std::shared_ptr<const ToolSet> tools;  // null: no tools, or tool_choice "none"
  bool required = false;  // tool_choice "required" or a named function: the answer is a call
};

ToolRequest read_tools(const nlohmann::json& body);

// An assistant message's tool_calls, checked, as chat templates take them: [{"id", "type":
// "function", "function": {"name", "arguments": {...}}}], the arguments parsed from the JSON text
// OpenAI clients send (an object is taken as well).
nlohmann::ordered_json read_tool_calls(const nlohmann::json& calls, const std::string& field);
// The request's tools as OpenAI lists them, for a template that writes them itself.
nlohmann::ordered_json tools_json(const ToolSet& tools);
// The conversation in the Hermes form, for a template that knows no tools: each assistant
// message's calls written after its text, tool results in user turns (consecutive ones together),
// and, when `tools` is given, the tools' section at the end of the system message (one is added
// when there is none).
std::vector<ChatMessage> hermes_messages(const std::vector<ChatMessage>& messages,
                                         const ToolSet* tools);
// Mistral's templates refuse a call id that is not 9 letters and digits, and this server's own
// ids ("call_" and 24 hex digits) are not: each other id becomes 9 such characters made from it,
// the same in the call and in its result, so a client can send the server's answers back.
std::vector<ChatMessage> mistral_call_ids(std::vector<ChatMessage> messages);
// `messages` with `block` at the end of the system message (one is added when there is none).
std::vector<ChatMessage> with_system_block(std::vector<ChatMessage> messages,
                                           const std::string& block);

}  // namespace ts::server
