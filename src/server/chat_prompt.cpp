#include "server/chat_prompt.h"

#include "server/tool_request.h"

namespace ts::server {

std::string chat_prompt_text(const ChatTemplate& chat, const ApiRequest& request) {
  ChatOptions options = request.chat_options;
  options.add_generation_prompt = true;
  options.continue_final_message = true;
  if (chat.renders_tools()) {
    if (request.tools != nullptr) options.tools = tools_json(*request.tools);
    const std::string_view format = chat.tool_format().name();
    if (format == "mistral" || format == "mistral_nemo")
      return chat.apply(mistral_call_ids(request.messages), options);
    return chat.apply(request.messages, options);
  }
  // The template writes calls in its family's format but lists no tools (DeepSeek's): the
  // history as it is, the tools described in the system message in that format.
  if (&chat.tool_format() != &hermes_tool_format()) {
    if (request.tools == nullptr) return chat.apply(request.messages, options);
    return chat.apply(
        with_system_block(request.messages, chat_tools(chat, request)->format_system_block()),
        options);
  }
  return chat.apply(hermes_messages(request.messages, request.tools.get()), options);
}

std::shared_ptr<const ToolSet> chat_tools(const ChatTemplate& chat, const ApiRequest& request) {
  if (request.tools == nullptr) return nullptr;
  if (!chat.renders_tools() && &chat.tool_format() == &hermes_tool_format()) return request.tools;
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
