// Standard base64 (RFC 4648, padding optional, no whitespace inside; the URL-safe '-' and '_'
// accepted too): image data URLs and tokenizer.json's precompiled charsmap.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace ts {

// The bytes `s` encodes; an error of `kind` naming `what` when it is not base64.
std::string base64_decode(std::string_view s, ErrorKind kind, const std::string& what);

}  // namespace ts
