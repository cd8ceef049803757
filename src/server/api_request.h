// OpenAI request bodies (/v1/completions, /v1/chat/completions) read into one checked form.
// A malformed field, a value out of OpenAI's range or a feature we do not implement (n > 1,
// echo, tools, ...) is an Input error naming the field; the HTTP layer answers it with 400.
// A field the server does not know (llama.cpp's grammar or mirostat, a misspelt name) is refused
// by name, as OpenAI's own server refuses an unrecognized argument: ignoring it would answer
// something other than what was asked.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "constrain/json_schema.h"
#include "constrain/tool_calls.h"
#include "text/chat_template.h"
#include "text/sampler.h"

namespace ts::server {

enum class ApiKind { Completion, Chat };

struct ApiRequest {
  ApiKind kind = ApiKind::Completion;
  std::string model;  // "" when absent
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Completion prompt: text, or token ids given directly.
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  // Completion: a list of prompts, each answered by `n` choices, prompt by prompt (choice index
  // prompt * n + i, as OpenAI numbers them). Empty for one prompt (prompt_text / prompt_tokens).
  struct Prompt {
    std::string text;
    std::vector<int32_t> tokens;  // when given as ids
  };
  std::vector<Prompt> prompt_list;
  // Chat: the messages as the client sent them (tool turns, calls with their arguments parsed,
  // reasoning_content); the template decides how they are written (server/chat_prompt.h).
  std::vector<ChatMessage> messages;
  // Chat: the bytes of each image_url part, in the order of their markers (kImageMarker) in the
  // messages' text.
  std::vector<std::string> images;
  std::vector<std::string> image_urls;  // per image: its http(s) URL (its bytes then empty) or ""
  // Chat: chat_template_kwargs (and reasoning_effort) as template variables; tools filled in
  // with the request's tool list.
  ChatOptions chat_options;
  int64_t max_tokens = -1;  // < 0: until end of generation or the context is full
  bool ignore_eos = false;
  bool cache_prompt = true;  // llama.cpp's switch: may start from a slot's cached prefix
  std::vector<std::string> stop;
  SamplerParams sampling;  // OpenAI's defaults: temperature 1, nucleus and top-k off
  // response_format json_object (JsonSchema::any_object()) or json_schema; null: text.
  std::shared_ptr<const JsonSchema> json;
  // Chat: the tools the model may call (null: none); and whether the answer must be a call
  // (tool_choice "required" or a named function).
  std::shared_ptr<const ToolSet> tools;
  bool tool_required = false;
  // Chat: reasoning_budget, the most tokens a thinking model's reasoning may take (-1: no
  // limit); absent: the server's --reasoning-budget.
  std::optional<int64_t> reasoning_budget;
  std::optional<uint64_t> seed;  // absent: the server draws one
  int top_logprobs = -1;         // < 0: no log-probabilities
  int n = 1;                     // choices: answers to the same prompt, each with its own draws
};

// The most choices one request may ask for (`n`): each is a request of its own to the scheduler.
constexpr int kMaxChoices = 16;

// `body` must be a JSON object.
ApiRequest parse_api_request(ApiKind kind, const nlohmann::json& body);

}  // namespace ts::server
