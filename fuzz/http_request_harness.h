// What one HTTP request fuzz input does: the bytes a client sends, judged by the connection gate
// (check_head) as they would arrive, then, when the head is complete, the body parsed as the
// server parses it (the nesting bound first) and read by parse_api_request. The gate's verdict on
// a complete head must not depend on what follows it (the gate judges before the body is read),
// a refusal must carry one of its statuses and a one-line message, and nothing may crash,
// however deep the JSON. Shared by the libFuzzer target and the replay test.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api_request_harness.h"
#include "core/json_nesting.h"
#include "parser_harness.h"
#include "server/request_head.h"

namespace ts::fuzz {

// True when the head is complete and its body is a request parse_api_request accepts.
inline bool check_http_request(const uint8_t* data, size_t size) {
  server::HttpLimits limits;
  limits.max_head_bytes = 4096;
  limits.max_request_line = 1024;
  limits.max_headers = 16;
  limits.max_body_bytes = 1u << 16;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const server::HeadVerdict v = server::check_head(in, limits);
  if (v.state == server::HeadState::Refused) {
    if (v.status != 400 && v.status != 413 && v.status != 414 && v.status != 431)
      violated("refused with status " + std::to_string(v.status));
    if (v.message.empty() || v.message.find('\n') != std::string::npos)
      violated("a refusal's message is not one line: " + v.message);
    return false;
  }
  if (v.state == server::HeadState::Incomplete) {
    if (size > limits.max_head_bytes) violated("a head past the size limit is still awaited");
    return false;
  }
  if (v.head_bytes == 0 || v.head_bytes > size || in[v.head_bytes - 1] != '\n')
    violated("a complete head does not end in its blank line");
  const server::HeadVerdict alone = server::check_head(in.substr(0, v.head_bytes), limits);
  if (alone.state != server::HeadState::Complete || alone.head_bytes != v.head_bytes ||
      alone.control != v.control)
    violated("the verdict on a head changed with the bytes after it");
  if (v.control && in.substr(0, 4) != "GET ") violated("a non-GET took the control lane");
  // The body as the route of its path reads it.
  const std::string_view body = in.substr(v.head_bytes);
  const nlohmann::json j = parse_json_or_discarded(body);
  if (j.is_discarded() || !j.is_object()) return false;
  if (json_nesting(body) > kMaxJsonNesting) violated("a body nested past the bound was parsed");
  // check_api_request's first byte picks the reader: the one the request line's path routes to.
  const std::string_view line = in.substr(0, in.find('\n'));
  char endpoint = 1;  // chat completions, for any other path
  if (line.find(" /v1/completions ") != std::string_view::npos) endpoint = 0;
  if (line.find(" /api/chat ") != std::string_view::npos) endpoint = 2;
  if (line.find(" /api/generate ") != std::string_view::npos) endpoint = 3;
  if (line.find(" /v1/responses ") != std::string_view::npos) endpoint = 4;
  std::string framed(1, endpoint);
  framed.append(body);
  return check_api_request(reinterpret_cast<const uint8_t*>(framed.data()), framed.size());
}

}  // namespace ts::fuzz
