// How the server names an HTTP failure: the OpenAI error type and code of each status it answers
// with, and the whole response of a refusal the connection gate writes itself, before httplib or
// any worker is involved. docs/SERVER.md lists the statuses.
#pragma once

#include <string>
#include <utility>

namespace ts::server {

// {type, code}: "invalid_request_error" or "server_error", and a code ("" when none).
std::pair<const char*, const char*> error_kind(int status);
const char* reason_phrase(int status);

// An HTTP/1.1 response with the OpenAI error body, Connection: close, and Retry-After: 1 for 503.
std::string refusal_text(int status, const std::string& message);

}  // namespace ts::server
