// The first check of an HTTP request, on the bytes of its head as they arrive and before any
// worker thread or HTTP parser sees them: a head is refused as soon as it breaks a limit (request
// line, header count or size, declared body size), so a client can neither make the server buffer
// without bound nor hold a worker while it trickles its headers in.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ts::server {

struct HttpLimits {
  size_t max_request_line = 8u << 10;  // method, target and version: 414 beyond
  size_t max_head_bytes = 32u << 10;   // request line and headers together: 431 beyond
  size_t max_headers = 100;            // 431 beyond
  size_t max_body_bytes = 4u << 20;    // declared (Content-Length) or read (chunked): 413 beyond
};

enum class HeadState { Incomplete, Complete, Refused };

struct HeadVerdict {
  HeadState state = HeadState::Incomplete;
  int status = 0;         // Refused: 400, 413, 414 or 431
  std::string message;    // Refused: one line naming the limit
  size_t head_bytes = 0;  // Complete: the head's length, its blank line included
  // Complete: a bodiless GET of /health or /metrics, which a lane of its own answers so that they
  // stay reachable while every request worker is busy.
  bool control = false;
};

// Judges `buffered`, the bytes received so far on a connection (a head and maybe the start of a
// body). Lines may end in CRLF or LF, as the HTTP parser after this accepts both.
HeadVerdict check_head(std::string_view buffered, const HttpLimits& limits);

}  // namespace ts::server
