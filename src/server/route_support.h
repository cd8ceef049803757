// What every route shares with the OpenAI ones: reading a body against the limit, noticing a
// client that left or a server that stops while an answer is gathered, and timestamps.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/generation.h"
#include "server/model_info.h"

namespace ts::server {

// How often a handler waiting for tokens checks that its client is still connected.
constexpr std::chrono::milliseconds kRoutePoll{50};

struct RouteContext {
  GenerationContext gen;
  size_t max_body_bytes;
  const httplib::Server& svr;
  const ModelInfo& model;
};

// 0 when `body` holds the request body whole; else the status to answer (413 past `limit`, 400
// cut short, too slow or malformed) with `message`. A chunked body is cut off at the limit while
// it arrives (httplib applies its payload limit to Content-Length bodies only).
int read_request_body(const httplib::ContentReader& reader, size_t limit, std::string& body,
                      std::string& message);

// Whether an answer gathered in its handler must stop: the client closed its connection, or the
// server is stopping.
enum class ClientState { Connected, Gone, Stopping };
ClientState client_state(const httplib::Server& svr);

int64_t unix_seconds();
// RFC 3339 in UTC with nanoseconds, as Ollama writes times ("2025-01-02T03:04:05.123456789Z").
std::string rfc3339(std::chrono::system_clock::time_point t);
std::string rfc3339_unix(int64_t unix_seconds);

}  // namespace ts::server
