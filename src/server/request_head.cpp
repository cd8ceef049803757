#include "server/request_head.h"

#include <algorithm>
#include <cctype>

namespace ts::server {
namespace {

HeadVerdict refuse(int status, std::string message) {
  HeadVerdict v;
  v.state = HeadState::Refused;
  v.status = status;
  v.message = std::move(message);
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The end of the head (just past its blank line), or npos while it has not all arrived.
size_t head_end(std::string_view s) {
  for (size_t i = s.find('\n'); i != std::string_view::npos; i = s.find('\n', i + 1)) {
    if (i + 1 < s.size() && s[i + 1] == '\n') return i + 2;
    if (i + 2 < s.size() && s[i + 1] == '\r' && s[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

std::string limit_text(size_t n) {
  return std::to_string(n);
}

}  // namespace

HeadVerdict check_head(std::string_view buffered, const HttpLimits& limits) {
  const size_t line_end = buffered.find('\n');
  if (line_end == std::string_view::npos ? buffered.size() > limits.max_request_line
                                         : line_end > limits.max_request_line)
    return refuse(
        414, "the request line is longer than " + limit_text(limits.max_request_line) + " bytes");
  const size_t end = head_end(buffered);
  const std::string_view head = buffered.substr(0, std::min(end, buffered.size()));
  // Header lines so far (the request line and the blank line not counted).
  size_t lines = static_cast<size_t>(std::count(head.begin(), head.end(), '\n'));
  const size_t headers = lines - std::min<size_t>(lines, end == std::string_view::npos ? 1 : 2);
  if (headers > limits.max_headers)
    return refuse(431, "the request has more than " + limit_text(limits.max_headers) + " headers");
  if ((end == std::string_view::npos ? buffered.size() : end) > limits.max_head_bytes)
    return refuse(431, "the request's headers are larger than " +
                           limit_text(limits.max_head_bytes) + " bytes");
  if (end == std::string_view::npos) return {};

  HeadVerdict v;
  v.state = HeadState::Complete;
  v.head_bytes = end;
  const std::string_view request_line = trim(head.substr(0, line_end));
  bool has_length = false, chunked = false;
  size_t length = 0;
  for (size_t at = line_end + 1; at < end;) {
    const size_t eol = head.find('\n', at);
    const std::string_view line = head.substr(at, eol - at);
    at = eol + 1;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // the blank line; the parser judges the rest
    const std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    if (same_name(name, "Content-Length")) {
      if (value.empty() || value.size() > 19 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return refuse(400, "Content-Length is not a number");
      const size_t n = std::stoull(std::string(value));
      if (has_length && n != length) return refuse(400, "two different Content-Length headers");
      has_length = true;
      length = n;
    } else if (same_name(name, "Transfer-Encoding")) {
      chunked = true;
    }
  }
  // Both at once is how requests are smuggled past proxies (RFC 9112 6.3).
  if (has_length && chunked) return refuse(400, "both Content-Length and Transfer-Encoding");
  if (length > limits.max_body_bytes)
    return refuse(413, "the request body is larger than the limit of " +
                           limit_text(limits.max_body_bytes) + " bytes");
  const size_t space = request_line.find(' ');
  const std::string_view method = request_line.substr(0, space);
  std::string_view target =
      space == std::string_view::npos ? std::string_view{} : request_line.substr(space + 1);
  target = target.substr(0, target.find(' '));
  target = target.substr(0, target.find('?'));
  v.control =
      method == "GET" && (target == "/health" || target == "/metrics") && length == 0 && !chunked;
  return v;
}

}  // namespace ts::server
