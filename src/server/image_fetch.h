// An image_url's http(s) URL fetched on a client's behalf: only when the server was started with
// --allow-image-urls. No redirects, bounded time and size; failures are Input errors (400s).
#pragma once

#include <cstddef>
#include <string>

namespace ts::server {

std::string fetch_image_url(const std::string& url, size_t max_bytes);

}  // namespace ts::server
