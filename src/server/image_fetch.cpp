#include "server/image_fetch.h"

#include <httplib.h>

#include "core/error.h"

namespace ts::server {

std::string fetch_image_url(const std::string& url, size_t max_bytes) {
  const size_t scheme_end = url.find("://");
  const size_t path_at = url.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
  const std::string origin = url.substr(0, path_at);
  const std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
  httplib::Client client(origin);
  if (!client.is_valid()) fail(ErrorKind::Input, "image URL '" + url + "' cannot be fetched");
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  client.set_follow_location(false);
  std::string body;
  bool too_big = false;
  const auto res = client.Get(path, [&](const char* data, size_t n) {
    if (body.size() + n > max_bytes) {
      too_big = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_big)
    fail(ErrorKind::Input,
         "image URL '" + url + "' is larger than " + std::to_string(max_bytes) + " bytes");
  if (!res)
    fail(ErrorKind::Input,
         "image URL '" + url + "' could not be fetched (" + httplib::to_string(res.error()) + ")");
  if (res->status != 200)
    fail(ErrorKind::Input, "image URL '" + url + "' answered HTTP " + std::to_string(res->status));
  return body;
}

}  // namespace ts::server
