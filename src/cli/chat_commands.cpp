#include "cli/chat_commands.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ts::cli {
namespace {

constexpr const char* kHelp =
    "/help this list; /clear start again; /save FILE, /load FILE the conversation as JSON; /exit";

void save(const std::string& path, const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::ordered_json j = {{"role", m.role}, {"content", m.content}};
    if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
    list.push_back(std::move(j));
  }
  std::ofstream out(path, std::ios::binary);
  out << nlohmann::ordered_json{{"messages", std::move(list)}}.dump(2) << "\n";
  if (!out) {
    std::fprintf(stderr, "chat: cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(stderr, "chat: saved %zu messages to %s\n", messages.size(), path.c_str());
}

void load(const std::string& path, std::vector<ChatMessage>& messages) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  const auto* list = j.is_object() && j.contains("messages") ? &j["messages"] : nullptr;
  std::vector<ChatMessage> loaded;
  for (size_t i = 0; list != nullptr && list->is_array() && i < list->size(); ++i) {
    const auto& m = (*list)[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      list = nullptr;
      break;
    }
    ChatMessage msg{m["role"].get<std::string>(), m["content"].get<std::string>()};
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string())
      msg.reasoning_content = m["reasoning_content"].get<std::string>();
    loaded.push_back(std::move(msg));
  }
  if (list == nullptr || !list->is_array()) {
    std::fprintf(
        stderr,
        "chat: %s is not a saved conversation ({\"messages\": [{\"role\", \"content\"}]})\n",
        path.c_str());
    return;
  }
  messages = std::move(loaded);
  std::fprintf(stderr, "chat: loaded %zu messages from %s\n", messages.size(), path.c_str());
}

}  // namespace

ChatCommand run_chat_command(const std::string& line, const std::string& system,
                             std::vector<ChatMessage>& messages) {
  if (line == "/exit" || line == "/quit") return ChatCommand::Exit;
  if (line == "/help") {
    std::fprintf(stderr, "%s\n", kHelp);
    return ChatCommand::Done;
  }
  if (line == "/clear") {
    messages.clear();
    if (!system.empty()) messages.push_back({"system", system});
    std::fprintf(stderr, "chat: cleared\n");
    return ChatCommand::Done;
  }
  for (const char* cmd : {"/save", "/load"}) {
    const std::string prefix = std::string(cmd) + " ";
    if (line.rfind(prefix, 0) != 0 && line != cmd) continue;
    const std::string path = line.size() > prefix.size() ? line.substr(prefix.size()) : "";
    if (path.empty()) {
      std::fprintf(stderr, "chat: %s needs a file name\n", cmd);
    } else if (cmd[1] == 's') {
      save(path, messages);
    } else {
      load(path, messages);
    }
    return ChatCommand::Done;
  }
  return ChatCommand::Message;
}

}  // namespace ts::cli
