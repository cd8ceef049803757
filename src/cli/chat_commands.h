// The chat's slash commands, read before a line goes to the model: /help, /clear (the
// conversation starts again from the system prompt), /save FILE and /load FILE (the conversation
// as JSON: {"messages": [{"role", "content"}, ...]}), /exit and /quit. Any other line is a message,
// those that start with "/" too (Qwen3 reads "/no_think" in a message).
#pragma once

#include <string>
#include <vector>

#include "text/chat_template.h"

namespace ts::cli {

enum class ChatCommand {
  Message,  // not a command: send the line to the model
  Done,     // a command ran (its result printed on stderr)
  Exit,
};

ChatCommand run_chat_command(const std::string& line, const std::string& system,
                             std::vector<ChatMessage>& messages);

}  // namespace ts::cli
