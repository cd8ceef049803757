// The tool-calling fields of a chat request (OpenAI's tools, tool_choice, parallel_tool_calls)
// and the tool turns of its messages, read into the Hermes text the model is prompted with
// (text/tool_calls.h). A malformed field is an Input error naming it (a 400).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "text/chat_template.h"
#include "text/tool_calls.h"

namespace ts::server {

struct ToolRequest {
  std::shared_ptr<const ToolSet> tools;  // null: no tools, or tool_choice "none"
  bool required = false;  // tool_choice "required" or a named function: the answer is a call
};

ToolRequest read_tools(const nlohmann::json& body);

// An assistant message's tool_calls as the model writes them, after its text.
std::string tool_calls_text(const nlohmann::json& calls, const std::string& field);
// A tool message's content as the model reads it (consecutive ones go into one user turn).
std::string tool_response_text(const std::string& content);
// Puts the tools' section at the end of the system message (adding one when there is none).
void add_tools_to_system(const ToolSet& tools, std::vector<ChatMessage>& messages);

}  // namespace ts::server
