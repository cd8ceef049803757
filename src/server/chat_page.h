// The web chat page served at GET /: src/server/web/chat.html, compiled into the binary by CMake
// (the page must work on machines without internet: nothing is fetched from a CDN).
#pragma once

#include <string_view>

namespace ts::server {

std::string_view chat_page_html();

// What the page may load and where it may connect: only this server, and its own inline script
// and style. A browser then refuses anything a model's text could smuggle in.
inline constexpr const char* kChatPagePolicy =
    "default-src 'none'; connect-src 'self'; script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; form-action 'none'";

}  // namespace ts::server
