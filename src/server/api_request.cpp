#include "server/api_request.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "server/json_fields.h"
#include "server/logprobs.h"
#include "server/tool_request.h"

namespace ts::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxStops = 16;
constexpr int64_t kMaxCompletionLogprobs = 5;  // OpenAI's limit for /v1/completions
// OpenAI's default for /v1/completions; chat completions run to the end of the answer.
constexpr int64_t kCompletionDefaultMaxTokens = 16;

// The fields each endpoint reads (below, and in the tool and response-format readers); "user" is
// OpenAI's end-user id, which identifies a client to no one here.
bool known_field(const std::string& name, ApiKind kind) {
  static const std::set<std::string> shared = {"model",
                                               "stream",
                                               "stream_options",
                                               "max_tokens",
                                               "stop",
                                               "temperature",
                                               "top_p",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "top_k",
                                               "min_p",
                                               "repeat_penalty",
                                               "repeat_last_n",
                                               "logit_bias",
                                               "response_format",
                                               "json_schema",
                                               "ignore_eos",
                                               "cache_prompt",
                                               "logprobs",
                                               "n",
                                               "seed",
                                               "user"};
  static const std::set<std::string> completion = {"prompt", "best_of", "echo", "suffix"};
  static const std::set<std::string> chat = {
      "messages",  "max_completion_tokens", "top_logprobs",
      "tools",     "tool_choice",           "parallel_tool_calls",
      "functions", "chat_template_kwargs",  "reasoning_effort"};
  return shared.count(name) != 0 ||
         (kind == ApiKind::Completion ? completion : chat).count(name) != 0;
}

// Fields of OpenAI's API that this server does not implement: refused, never silently ignored,
// since a client that sends them expects their effect.
void refuse_unsupported(const json& body, ApiKind kind) {
  for (const auto& [name, value] : body.items())
    if (!known_field(name, kind)) bad(name, "is not a field this server implements");
  if (kind == ApiKind::Completion) {
    if (integer(body, "best_of", 1, 1, 1) != 1) bad("best_of", "must be 1");
    if (boolean(body, "echo", false)) bad("echo", "is not supported");
    if (!string(body, "suffix").empty()) bad("suffix", "is not supported");
  } else {
    const json* v = get(body, "functions");
    if (v != nullptr && !(v->is_array() && v->empty()))
      bad("functions", "(the deprecated form of tools) is not supported: send \"tools\"");
  }
}

// {"type": "text"}, {"type": "json_object"} (JSON mode) or {"type": "json_schema", "json_schema":
// {"name": ..., "schema": {...}, "strict": ...}} (structured outputs; without a schema, JSON
// mode). The schema is compiled here, so what it asks that is not implemented is a 400.
std::shared_ptr<const JsonSchema> response_format(const json& body) {
  const json* rf = get(body, "response_format");
  if (const json* top = get(body, "json_schema"); top != nullptr) {
    // llama.cpp's spelling: the schema itself at the top level.
    if (rf != nullptr) bad("json_schema", "cannot be combined with response_format");
    try {
      return std::make_shared<const JsonSchema>(JsonSchema::compile(*top));
    } catch (const Error& e) {
      bad("json_schema", e.what());
    }
  }
  if (rf == nullptr) return nullptr;
  const json* type = rf->is_object() ? get(*rf, "type") : nullptr;
  if (type != nullptr && *type == "text") return nullptr;
  if (type != nullptr && *type == "json_object") return JsonSchema::any_object();
  if (type == nullptr || *type != "json_schema")
    bad("response_format", "must be of type \"text\", \"json_object\" or \"json_schema\"");
  const json* spec = get(*rf, "json_schema");
  if (spec == nullptr || !spec->is_object())
    bad("response_format", "json_schema needs a \"json_schema\" object");
  const json* schema = get(*spec, "schema");
  if (schema == nullptr) return JsonSchema::any_object();
  try {
    return std::make_shared<const JsonSchema>(JsonSchema::compile(*schema));
  } catch (const Error& e) {
    bad("response_format", e.what());
  }
}

// OpenAI's {"token id": bias, ...}: ids as decimal strings, biases in [-100, 100] (-100 bans).
std::vector<std::pair<int32_t, float>> logit_bias(const json& body) {
  const json* v = get(body, "logit_bias");
  if (v == nullptr) return {};
  if (!v->is_object()) bad("logit_bias", "must be an object of token ids and biases");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, bias] : v->items()) {
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(key) > std::numeric_limits<int32_t>::max())
      bad("logit_bias", "keys must be token ids (non-negative integers), got \"" + key + "\"");
    if (!bias.is_number()) bad("logit_bias", "values must be numbers");
    const double x = bias.get<double>();
    if (!(x >= -kBanBias && x <= kBanBias))
      bad("logit_bias", "values must be between -100 and 100, got " + bias.dump());
    out.emplace_back(static_cast<int32_t>(std::stoll(key)), static_cast<float>(x));
  }
  return out;
}

std::vector<std::string> stops(const json& body) {
  const json* v = get(body, "stop");
  if (v == nullptr) return {};
  std::vector<std::string> out;
  const auto add = [&](const json& s) {
    if (!s.is_string()) bad("stop", "must be a string or a list of strings");
    if (s.get_ref<const std::string&>().empty()) bad("stop", "must not contain an empty string");
    out.push_back(s.get<std::string>());
  };
  if (v->is_array()) {
    if (v->size() > kMaxStops)
      bad("stop", "has more than " + std::to_string(kMaxStops) + " strings");
    for (const json& s : *v) add(s);
  } else {
    add(*v);
  }
  return out;
}

std::vector<int32_t> token_list(const json& v) {
  std::vector<int32_t> out;
  for (const json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad("prompt", "token ids must be non-negative integers");
    out.push_back(t.get<int32_t>());
  }
  return out;
}

// A string, a list of token ids, or a list of prompts (strings or lists of token ids).
void read_prompt(const json& body, ApiRequest& r) {
  const json* v = get(body, "prompt");
  if (v == nullptr) bad("prompt", "is required");
  if (v->is_string()) {
    r.prompt_text = v->get<std::string>();
    return;
  }
  if (!v->is_array() || v->empty())
    bad("prompt", "must be a string, a list of token ids or a list of these");
  const json& first = (*v)[0];
  if (first.is_number()) {
    r.prompt_tokens = token_list(*v);
    return;
  }
  std::vector<ApiRequest::Prompt> prompts;
  for (const json& p : *v) {
    if (p.is_string()) {
      prompts.push_back({p.get<std::string>(), {}});
    } else if (p.is_array() && !p.empty()) {
      prompts.push_back({"", token_list(p)});
    } else {
      bad("prompt", "must be a string, a list of token ids or a list of these");
    }
  }
  r.prompt_text = prompts[0].text;
  r.prompt_tokens = prompts[0].tokens;
  if (prompts.size() > 1) r.prompt_list = std::move(prompts);
}

// String content, or a list of parts of which only text parts are understood.
std::string content_text(const json& content, size_t i) {
  const std::string field = "messages[" + std::to_string(i) + "].content";
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(field, "must be a string or a list of content parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string())
      bad(field,
          "parts must be {\"type\": \"text\", \"text\": ...}: other content is not supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::string optional_string(const json& m, const char* name, const std::string& field) {
  const json* v = get(m, name);
  if (v == nullptr) return {};
  if (!v->is_string()) bad(field + "." + name, "must be a string");
  return v->get<std::string>();
}

void read_messages(const json& body, ApiRequest& r) {
  const json* v = get(body, "messages");
  if (v == nullptr) bad("messages", "is required");
  if (!v->is_array() || v->empty()) bad("messages", "must be a non-empty list");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(field, "must be an object");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) bad(field + ".role", "must be a string");
    ChatMessage msg;
    msg.role = role->get<std::string>();
    // OpenAI's newer name for the system role.
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      bad(field + ".role",
          "must be system, developer, user, assistant or tool, got '" + msg.role + "'");
    const auto content = m.find("content");
    msg.content = content == m.end() ? std::string() : content_text(*content, i);
    if (const auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
      if (msg.role != "assistant") bad(field + ".tool_calls", "belong to assistant messages");
      msg.tool_calls = read_tool_calls(*calls, field + ".tool_calls");
    }
    msg.reasoning_content = optional_string(m, "reasoning_content", field);
    msg.tool_call_id = optional_string(m, "tool_call_id", field);
    msg.name = optional_string(m, "name", field);
    r.messages.push_back(std::move(msg));
  }
}

// chat_template_kwargs (llama.cpp's and vLLM's field): variables for the chat template, such as
// enable_thinking; OpenAI's reasoning_effort is one more.
void read_template_kwargs(const json& body, ApiRequest& r) {
  nlohmann::ordered_json& kwargs = r.chat_options.kwargs;
  if (const json* k = get(body, "chat_template_kwargs"); k != nullptr) {
    if (!k->is_object()) bad("chat_template_kwargs", "must be an object");
    for (const auto& [key, value] : k->items()) kwargs[key] = nlohmann::ordered_json(value);
  }
  const std::string effort = string(body, "reasoning_effort");
  if (!effort.empty()) {
    if (effort != "low" && effort != "medium" && effort != "high")
      bad("reasoning_effort", "must be low, medium or high");
    kwargs["reasoning_effort"] = effort;
  }
}

}  // namespace

ApiRequest parse_api_request(ApiKind kind, const json& body) {
  ApiRequest r;
  r.kind = kind;
  refuse_unsupported(body, kind);
  r.model = string(body, "model");
  r.stream = boolean(body, "stream", false);
  if (const json* so = get(body, "stream_options"); so != nullptr) {
    if (!so->is_object()) bad("stream_options", "must be an object");
    r.include_usage = boolean(*so, "include_usage", false);
  }
  if (kind == ApiKind::Completion) {
    read_prompt(body, r);
  } else {
    read_messages(body, r);
    read_template_kwargs(body, r);
    const ToolRequest tools = read_tools(body);
    r.tools = tools.tools;
    r.tool_required = tools.required;
  }
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  const int64_t def = kind == ApiKind::Completion ? kCompletionDefaultMaxTokens : -1;
  r.max_tokens = integer(body, "max_tokens", 1, kIntMax, def);
  if (kind == ApiKind::Chat)
    r.max_tokens = integer(body, "max_completion_tokens", 1, kIntMax, r.max_tokens);
  r.stop = stops(body);
  SamplerParams& p = r.sampling;
  p.temperature = static_cast<float>(number(body, "temperature", 0.0, 2.0, 1.0));
  p.top_p = static_cast<float>(number(body, "top_p", 0.0, 1.0, 1.0));
  if (p.top_p <= 0.0f)
    bad("top_p", "must be greater than 0 (use temperature 0 for greedy decoding)");
  p.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2.0, 2.0, 0.0));
  p.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2.0, 2.0, 0.0));
  // Extensions in llama.cpp's server's spelling; off unless asked for, as in OpenAI's API.
  p.top_k = static_cast<int32_t>(integer(body, "top_k", 0, kIntMax, 0));
  p.min_p = static_cast<float>(number(body, "min_p", 0.0, 1.0, 0.0));
  p.repeat_penalty = static_cast<float>(number(body, "repeat_penalty", 0.0, 10.0, 1.0));
  if (p.repeat_penalty <= 0.0f) bad("repeat_penalty", "must be greater than 0");
  p.penalty_last_n =
      static_cast<int32_t>(integer(body, "repeat_last_n", -1, kIntMax, p.penalty_last_n));
  p.logit_bias = logit_bias(body);
  r.json = response_format(body);
  if (r.json != nullptr && r.tools != nullptr)
    bad("response_format", "cannot be combined with tools (a tool call has its own schema)");
  r.ignore_eos = boolean(body, "ignore_eos", false);
  r.cache_prompt = boolean(body, "cache_prompt", true);
  if (kind == ApiKind::Completion) {
    r.top_logprobs = static_cast<int>(integer(body, "logprobs", 0, kMaxCompletionLogprobs, -1));
  } else if (boolean(body, "logprobs", false)) {
    r.top_logprobs = static_cast<int>(integer(body, "top_logprobs", 0, kMaxTopLogprobs, 0));
  } else if (get(body, "top_logprobs") != nullptr) {
    bad("top_logprobs", "needs \"logprobs\": true");
  }
  r.n = static_cast<int>(integer(body, "n", 1, kMaxChoices, 1));
  // Every answer is a job of its own in the scheduler's queue: prompts x n is bounded as n is.
  if (!r.prompt_list.empty() && r.prompt_list.size() * r.n > static_cast<size_t>(kMaxChoices))
    bad("prompt", "holds " + std::to_string(r.prompt_list.size()) +
                      " prompts, which with n = " + std::to_string(r.n) + " makes more than " +
                      std::to_string(kMaxChoices) + " answers in one request");
  if (const json* s = get(body, "seed"); s != nullptr) {
    if (!s->is_number_integer()) bad("seed", "must be an integer");
    r.seed =
        s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
  }
  return r;
}

}  // namespace ts::server
