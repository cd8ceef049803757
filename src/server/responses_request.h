// OpenAI's Responses request body (POST /v1/responses) read into the server's checked ApiRequest.
// As for Ollama's routes, the body is rewritten as the chat-completions request it means (input
// items as messages, instructions as the system message, function tools flattened back into
// OpenAI's nested form, text.format as response_format, reasoning.effort) and read by
// parse_api_request, so every check is shared; errors name the Responses fields.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/api_request.h"

namespace ts::server {

struct ResponsesRequest {
  ApiRequest api;
  bool stream = false;
  bool store = true;        // kept for a later previous_response_id
  bool summary = false;     // reasoning.summary asked for: the thinking is also given as summary
  std::string previous_id;  // "" when none
  // The conversation this request adds to what previous_id holds, as chat messages (without the
  // instructions, which OpenAI does not carry over to the next response).
  nlohmann::json new_messages = nlohmann::json::array();
  // The request's fields a Response object repeats back.
  nlohmann::json echo = nlohmann::json::object();
};

// The fields read before the conversation is known: previous_response_id ("" when absent).
std::string previous_response_id(const nlohmann::json& body);

// `body` must be a JSON object; `prior` is the conversation of previous_response_id (an empty
// array when there is none).
ResponsesRequest parse_responses_request(const nlohmann::json& body, const nlohmann::json& prior);

}  // namespace ts::server
