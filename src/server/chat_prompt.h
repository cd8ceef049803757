// The prompt text of a chat request: the model's template (or built-in format) on its messages.
// A template that writes tools itself (ChatTemplate::renders_tools) gets the request's tools and
// its tool turns as they are; any other gets the conversation in the Hermes form, the tools
// described in the system message (server/tool_request.h). A conversation that ends with an
// assistant message is continued from where that message stops (a prefill).
#pragma once

#include <string>

#include "server/api_request.h"
#include "text/chat_template.h"

namespace ts::server {

std::string chat_prompt_text(const ChatTemplate& chat, const ApiRequest& request);

}  // namespace ts::server
