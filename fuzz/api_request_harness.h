// What one API-request fuzz input does: its first byte picks the endpoint (0 completions, 1 chat
// completions, 2 Ollama's /api/chat, 3 its /api/generate, 4 /v1/responses; modulo 5), the rest is
// the request body; the other dialects are read into the same ApiRequest. A body that is not a JSON
// object is the HTTP layer's 400 before any of this; an object is refused by parse_api_request with
// a one-line Input error (also a 400) or accepted (true), and an accepted request's sampling
// parameters must then be ones the Sampler takes: a request past the parser must not fail later,
// where it would be the server's error rather than the client's. Shared by the libFuzzer target and
// the replay test.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/json_nesting.h"
#include "parser_harness.h"
#include "server/api_request.h"
#include "server/ollama_request.h"
#include "server/responses_request.h"
#include "text/sampler.h"

namespace ts::fuzz {

inline bool check_api_request(const uint8_t* data, size_t size) {
  if (size == 0) return false;
  const int endpoint = data[0] % 5;
  auto kind = endpoint == 0 ? server::ApiKind::Completion : server::ApiKind::Chat;
  // As the server reads a body: nesting past the bound is refused before parsing.
  const nlohmann::json body =
      parse_json_or_discarded({reinterpret_cast<const char*>(data + 1), size - 1});
  if (body.is_discarded() || !body.is_object()) return false;
  server::ApiRequest r;
  try {
    switch (endpoint) {
      case 2:
        r = server::parse_ollama_chat(body).api;
        break;
      case 3: {
        const server::OllamaRequest o = server::parse_ollama_generate(body, data[0] % 2 == 0);
        if (o.load_only) return true;
        r = o.api;
        kind = r.kind;
        break;
      }
      case 4:
        r = server::parse_responses_request(body, nlohmann::json::array()).api;
        break;
      default:
        r = server::parse_api_request(kind, body);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Input ||
        std::string_view(e.what()).find('\n') != std::string_view::npos)
      violated(std::string("request refused with: ") + e.what());
    return false;
  }
  if (r.kind != kind) violated("the request changed its endpoint");
  if (kind == server::ApiKind::Chat && r.messages.empty()) violated("a chat without messages");
  try {
    const Sampler sampler(r.sampling);
  } catch (const Error& e) {
    violated(std::string("accepted sampling parameters the sampler refuses: ") + e.what());
  }
  return true;
}

}  // namespace ts::fuzz
