// OpenAI `image_url` content parts of a chat message: the image's bytes from a `data:` URL
// (base64), and the marker that stands for it in the message's text until the prompt is tokenized
// (each marker then becomes the model's image block). http(s) URLs are refused: the server never
// fetches on a client's behalf.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace ts::server {

// Text no client writes by accident (a control character inside; none at its ends, which a
// template's trim would take).
inline constexpr std::string_view kImageMarker = "<|turbospark\x1eimage|>";

// The bytes of `part` ({"type": "image_url", "image_url": {"url": ...}} or "image_url": "...")
// from its data: URL; or, for an http(s) URL, "" with the URL in *url (fetched later, if the
// server allows it). Errors (ErrorKind::Input) name `field`.
std::string image_part_bytes(const nlohmann::json& part, const std::string& field,
                             std::string* url);

}  // namespace ts::server
