// Ollama's API, for the editors and desktop apps that speak only it:
//   POST /api/chat, POST /api/generate  (streamed as NDJSON unless "stream": false)
//   GET /api/tags, GET /api/ps, POST /api/show, GET /api/version
// Requests are read by server/ollama_request.h and generated on the shared path
// (server/generation.h); errors are Ollama's {"error": "message"} with the same statuses as the
// OpenAI routes (400 naming the field, 404 for another model, 413, 503 with Retry-After).
#pragma once

#include <httplib.h>

#include "server/route_support.h"

namespace ts::server {

// The Ollama API version /api/version reports: the release whose API these routes follow. Apps
// compare it to the least version they need, so it says what is spoken, not turbospark's own.
inline constexpr const char* kOllamaApiVersion = "0.12.0";

void add_ollama_routes(httplib::Server& svr, const RouteContext& ctx);

// {"error": message} with `status` (Retry-After: 1 for 503).
void ollama_error(httplib::Response& res, int status, const std::string& message);

}  // namespace ts::server
