#include "server/http_errors.h"

#include "server/api_response.h"

namespace ts::server {

std::pair<const char*, const char*> error_kind(int status) {
  switch (status) {
    case 408:
      return {"invalid_request_error", "request_timeout"};
    case 413:
      return {"invalid_request_error", "request_too_large"};
    case 414:
      return {"invalid_request_error", "request_line_too_long"};
    case 431:
      return {"invalid_request_error", "headers_too_large"};
    case 503:
      return {"server_error", "server_busy"};
    default:
      return {status >= 500 ? "server_error" : "invalid_request_error", ""};
  }
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string refusal_text(int status, const std::string& message) {
  const auto [type, code] = error_kind(status);
  const std::string body = dump(error_json(message, type, code));
  std::string head =
      "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n";
  if (status == 503) head += "Retry-After: 1\r\n";
  return head + "\r\n" + body;
}

}  // namespace ts::server
