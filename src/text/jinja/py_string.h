// Python's str methods on UTF-8 text, as chat templates call them (strip, split, startswith, ...).
// Characters are code points, as in Python; case mapping covers ASCII only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ts::jinja::py {

// The characters of `s` (a byte that starts no valid sequence counts as one character).
std::vector<std::string_view> chars(std::string_view s);
size_t length(std::string_view s);

// str.strip / lstrip / rstrip: `set` (its characters) or, when absent, whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& set, bool left, bool right);
// str.split(sep, maxsplit) (maxsplit < 0: no limit); sep absent splits on runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               long maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                long maxsplit);
std::vector<std::string> splitlines(std::string_view s);
std::string replace(std::string_view s, std::string_view from, std::string_view to, long count);
size_t count(std::string_view s, std::string_view sub);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
bool is_space(std::string_view s);

}  // namespace ts::jinja::py
