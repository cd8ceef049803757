#include "server/chat_prompt.h"

#include "server/tool_request.h"

namespace ts::server {

std::string chat_prompt_text(const ChatTemplate& chat, const ApiRequest& request) {
  ChatOptions options = request.chat_options;
  options.add_generation_prompt = true;
  options.continue_final_message = true;
  if (chat.renders_tools()) {
    if (request.tools != nullptr) options.tools = tools_json(*request.tools);
    return chat.apply(request.messages, options);
  }
  return chat.apply(hermes_messages(request.messages, request.tools.get()), options);
}

}  // namespace ts::server
