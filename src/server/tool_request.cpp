#include "server/tool_request.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_nesting.h"
#include "server/json_fields.h"

namespace ts::server {

using nlohmann::json;

namespace {

// OpenAI's rule for function names: letters, digits, '_' and '-', at most 64.
bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

Tool read_tool(const json& t, const std::string& field) {
  if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
      !t["function"].is_object())
    bad(field, "must be {\"type\": \"function\", \"function\": {...}}");
  const json& f = t["function"];
  Tool tool;
  if (!f.contains("name") || !f["name"].is_string() || !valid_name(f["name"].get<std::string>()))
    bad(field + ".function.name", "must be 1 to 64 letters, digits, '_' or '-'");
  tool.name = f["name"].get<std::string>();
  if (f.contains("description") && !f["description"].is_null()) {
    if (!f["description"].is_string()) bad(field + ".function.description", "must be a string");
    tool.description = f["description"].get<std::string>();
  }
  tool.parameters = f.contains("parameters") && !f["parameters"].is_null()
                        ? f["parameters"]
                        : json{{"type", "object"}, {"properties", json::object()}};
  try {
    tool.schema = std::make_shared<const JsonSchema>(JsonSchema::compile(tool.parameters));
  } catch (const Error& e) {
    bad(field + ".function.parameters", e.what());
  }
  return tool;
}

}  // namespace

ToolRequest read_tools(const json& body) {
  std::vector<Tool> tools;
  if (const json* t = get(body, "tools"); t != nullptr) {
    if (!t->is_array()) bad("tools", "must be a list");
    for (size_t i = 0; i < t->size(); ++i)
      tools.push_back(read_tool((*t)[i], "tools[" + std::to_string(i) + "]"));
  }
  const bool parallel = boolean(body, "parallel_tool_calls", true);
  ToolRequest r;
  const json* choice = get(body, "tool_choice");
  if (choice == nullptr || *choice == "auto") {
    if (!tools.empty()) r.tools = std::make_shared<const ToolSet>(std::move(tools), parallel);
    return r;
  }
  if (*choice == "none") return r;
  if (tools.empty()) bad("tool_choice", "needs \"tools\"");
  auto set = std::make_shared<const ToolSet>(std::move(tools), parallel);
  r.required = true;
  if (*choice == "required") {
    r.tools = set;
    return r;
  }
  if (!choice->is_object() || choice->value("type", "") != "function" ||
      !choice->contains("function") || !(*choice)["function"].is_object() ||
      !(*choice)["function"].contains("name") || !(*choice)["function"]["name"].is_string())
    bad("tool_choice",
        "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
        "{\"name\": ...}}");
  try {
    r.tools = set->only((*choice)["function"]["name"].get<std::string>());
  } catch (const Error& e) {
    bad("tool_choice", e.what());
  }
  return r;
}

nlohmann::ordered_json read_tool_calls(const json& calls, const std::string& field) {
  using ordered = nlohmann::ordered_json;
  if (!calls.is_array()) bad(field, "must be a list");
  ordered out = ordered::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
        !c["function"].contains("name") || !c["function"]["name"].is_string())
      bad(at,
          "must be {\"type\": \"function\", \"function\": {\"name\": ..., \"arguments\": ...}}");
    const json& f = c["function"];
    // Arguments come back as the JSON text the server sent; an object is taken as well.
    ordered args = ordered(f.value("arguments", json("{}")));
    // Parsed keeping the keys in order (templates show them as sent); text nested past the bound
    // is refused like text that is no object.
    if (args.is_string()) {
      const std::string text = args.get<std::string>();
      args = json_nesting(text) <= kMaxJsonNesting ? ordered::parse(text, nullptr, false)
                                                   : ordered(ordered::value_t::discarded);
    }
    if (!args.is_object()) bad(at + ".function.arguments", "must be a JSON object (or its text)");
    ordered call = ordered::object();
    if (c.contains("id") && c["id"].is_string()) call["id"] = c["id"];
    call["type"] = "function";
    call["function"] = {{"name", f["name"]}, {"arguments", std::move(args)}};
    out.push_back(std::move(call));
  }
  return out;
}

nlohmann::ordered_json tools_json(const ToolSet& tools) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Tool& t : tools.tools()) {
    nlohmann::ordered_json f = {{"name", t.name}};
    if (!t.description.empty()) f["description"] = t.description;
    f["parameters"] = nlohmann::ordered_json(t.parameters);
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

std::vector<ChatMessage> hermes_messages(const std::vector<ChatMessage>& messages,
                                         const ToolSet* tools) {
  std::vector<ChatMessage> out;
  bool after_result = false;  // the message before was a tool result
  for (const ChatMessage& m : messages) {
    ChatMessage h{m.role, m.content};
    h.reasoning_content = m.reasoning_content;
    if (m.tool_calls.is_array()) {
      for (const auto& call : m.tool_calls) {
        if (!h.content.empty()) h.content += '\n';
        h.content += tool_call_text(call["function"]["name"].get<std::string>(),
                                    call["function"]["arguments"].dump());
      }
    }
    const bool result = m.role == "tool";
    if (result) {
      h.role = "user";
      h.content = "<tool_response>\n" + m.content + "\n</tool_response>";
      if (after_result) {
        out.back().content += "\n" + h.content;
        continue;
      }
    }
    after_result = result;
    out.push_back(std::move(h));
  }
  return tools != nullptr ? with_system_block(std::move(out), tools->system_block()) : out;
}

namespace {

bool mistral_id(const std::string& id) {
  return id.size() == 9 && std::all_of(id.begin(), id.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c));
         });
}

// 9 letters and digits from a hash of `id` (FNV-1a): stable, so a call and its result agree.
std::string to_mistral_id(const std::string& id) {
  if (mistral_id(id)) return id;
  uint64_t h = 1469598103934665603ull;
  for (char c : id) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  static constexpr char kDigits[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string out;
  for (int i = 0; i < 9; ++i, h /= 62) out += kDigits[h % 62];
  return out;
}

}  // namespace

std::vector<ChatMessage> mistral_call_ids(std::vector<ChatMessage> messages) {
  for (ChatMessage& m : messages) {
    if (!m.tool_call_id.empty()) m.tool_call_id = to_mistral_id(m.tool_call_id);
    if (!m.tool_calls.is_array()) continue;
    for (auto& call : m.tool_calls)
      if (call.contains("id") && call["id"].is_string())
        call["id"] = to_mistral_id(call["id"].get<std::string>());
  }
  return messages;
}

std::vector<ChatMessage> with_system_block(std::vector<ChatMessage> messages,
                                           const std::string& block) {
  if (!messages.empty() && messages.front().role == "system") {
    std::string& system = messages.front().content;
    system += (system.empty() ? "" : "\n\n") + block;
  } else {
    messages.insert(messages.begin(), ChatMessage{"system", block});
  }
  return messages;
}

}  // namespace ts::server
