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

std::shared_ptr<const ToolSet> chat_tools(const ChatTemplate& chat, const ApiRequest& request) {
  if (request.tools == nullptr || !chat.renders_tools()) return request.tools;
  return request.tools->in_format(chat.tool_format());
}

std::string required_call_opening(const ToolSet& tools) {
  return tools.format().forced_opening();
}

std::vector<int32_t> chat_shown_tokens(const ChatTemplate& chat, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (const std::string& text : chat.tool_format().preserved_tokens())
    if (const auto id = tok.find_token(text)) ids.push_back(*id);
  return ids;
}

}  // namespace ts::server
