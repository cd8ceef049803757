// A bound on how deeply JSON text nests arrays and objects, checked on the text before a parser
// builds anything. nlohmann::json parses iteratively but copies, compares and dumps recursively,
// and so do our walks over schemas and tool parameters: a value nested tens of thousands deep
// (a few hundred KB of brackets) would overflow the stack there. Every reader of JSON that
// comes from a request or a file goes through parse_json_bounded, so no such value exists.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace ts {

// Deeper than any real request, schema or model file (OpenAI allows schemas 10 objects deep).
constexpr size_t kMaxJsonNesting = 64;

// The deepest nesting of arrays and objects in `text` (brackets inside strings not counted),
// scanning no further than one level past `limit`. Malformed text is measured all the same;
// the parser refuses it afterwards.
size_t json_nesting(std::string_view text, size_t limit = kMaxJsonNesting);

// Throws an Error of `kind`, "<what> nests arrays and objects deeper than 64 levels", when it does.
void require_json_nesting(std::string_view text, const std::string& what, ErrorKind kind);

// nlohmann::json::parse(text) that throws an Error of `kind`, "<what> is not valid JSON" or
// "<what> nests arrays and objects deeper than 64 levels", instead of building a deeper value.
nlohmann::json parse_json_bounded(std::string_view text, const std::string& what,
                                  ErrorKind kind = ErrorKind::Input);

// The file at `path` parsed so (a Model error naming it when it cannot be read or parsed).
nlohmann::json parse_json_file(const std::string& path);

// The same, answering discarded (is_discarded()) for either failure.
nlohmann::json parse_json_or_discarded(std::string_view text);

}  // namespace ts
