// The prompt text of a chat request: the model's template (or built-in format) on its messages.
// A template that writes tools itself (ChatTemplate::renders_tools) gets the request's tools and
// its tool turns as they are, and its calls are read in its family's format
// (constrain/tool_format.h); any other gets the conversation in the Hermes form, the tools
// described in the system message (server/tool_request.h). A conversation that ends with an
// assistant message is continued from where that message stops (a prefill).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/api_request.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ts::server {

std::string chat_prompt_text(const ChatTemplate& chat, const ApiRequest& request);
// The request's tools in the format the model's answers will write them (null: no tools).
std::shared_ptr<const ToolSet> chat_tools(const ChatTemplate& chat, const ApiRequest& request);
// What the prompt of a required call ends with, so that the model writes only the call: the
// format's opening marker (and, in Hermes, the line break after it).
std::string required_call_opening(const ToolSet& tools);
// The control tokens the template's formats are spelled with (tool calls, harmony channels), as
// ids of `tok` (those it has): shown as text in answers (SchedulerOptions::shown_tokens).
std::vector<int32_t> chat_shown_tokens(const ChatTemplate& chat, const Tokenizer& tok);

}  // namespace ts::server
