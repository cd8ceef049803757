#include "server/route_support.h"

#include <ctime>

#include "server/socket_stream.h"

namespace ts::server {

int read_request_body(const httplib::ContentReader& reader, size_t limit, std::string& body,
                      std::string& message) {
  bool over = false;
  const bool read = reader([&](const char* data, size_t n) {
    if (n > limit - body.size()) {
      over = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  const SocketStream* conn = current_stream();
  if (over || (conn != nullptr && conn->over_limit())) {
    message = "the request body is larger than the limit of " + std::to_string(limit) + " bytes";
    return 413;
  }
  if (!read) {
    message = "the request body could not be read (cut short, too slow or malformed)";
    return 400;
  }
  return 0;
}

ClientState client_state(const httplib::Server& svr) {
  const SocketStream* conn = current_stream();
  if (conn != nullptr && !conn->is_writable()) return ClientState::Gone;
  if (!svr.is_running()) return ClientState::Stopping;
  return ClientState::Connected;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char out[64];
  const size_t n = std::strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(out + n, sizeof(out) - n, ".%09lldZ", static_cast<long long>(ns % 1000000000));
  return out;
}

std::string rfc3339_unix(int64_t unix_seconds) {
  return rfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(unix_seconds)));
}

}  // namespace ts::server
