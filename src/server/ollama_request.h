// Ollama's request bodies (/api/chat, /api/generate) read into the server's checked ApiRequest.
// The body is rewritten as the OpenAI request it means (messages, tools, format as
// response_format, options as sampling fields) and read by parse_api_request, so both dialects
// share every check. A field is refused by its Ollama name ("'options.temperature' must be ...").
// Ollama's sampling defaults apply where a request names none (temperature 0.8, top_k 40, top_p
// 0.9, repeat_penalty 1.1 over the last 64 tokens): an Ollama client expects Ollama's behaviour.
#pragma once

#include <nlohmann/json.hpp>

#include "server/api_request.h"

namespace ts::server {

struct OllamaRequest {
  ApiRequest api;
  bool stream = true;      // Ollama streams unless told not to
  bool load_only = false;  // /api/generate without a prompt: Ollama's "load the model" call
};

// `body` must be a JSON object. `has_chat`: the model has a chat format, so /api/generate's prompt
// goes through it (as Ollama applies the model's template) unless "raw" is set.
OllamaRequest parse_ollama_chat(const nlohmann::json& body);
OllamaRequest parse_ollama_generate(const nlohmann::json& body, bool has_chat);

}  // namespace ts::server
