#include "text/jinja/py_string.h"

#include <algorithm>

#include "core/utf8.h"

namespace ts::jinja::py {
namespace {

// str.isspace() on ASCII.
bool space_char(std::string_view c) {
  if (c.size() != 1) return false;
  const char x = c[0];
  return x == ' ' || (x >= '\t' && x <= '\r') || (x >= '\x1c' && x <= '\x1f');
}

bool in_set(std::string_view c, const std::optional<std::string>& set) {
  if (!set) return space_char(c);
  for (std::string_view s : chars(*set))
    if (s == c) return true;
  return false;
}

bool ascii_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
char to_upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c;
}
char to_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
}

std::string join_views(const std::vector<std::string_view>& v, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += v[i];
  return out;
}

}  // namespace

std::vector<std::string_view> chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::max<size_t>(1, utf8_valid_prefix(s, i));
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) i += std::max<size_t>(1, utf8_valid_prefix(s, i));
  return n;
}

std::string strip(std::string_view s, const std::optional<std::string>& set, bool left,
                  bool right) {
  const std::vector<std::string_view> c = chars(s);
  size_t b = 0;
  size_t e = c.size();
  if (left)
    while (b < e && in_set(c[b], set)) ++b;
  if (right)
    while (e > b && in_set(c[e - 1], set)) --e;
  return join_views(c, b, e);
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               long maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  const std::vector<std::string_view> c = chars(s);
  size_t i = 0;
  while (true) {
    while (i < c.size() && space_char(c[i])) ++i;
    if (i == c.size()) break;
    if (maxsplit >= 0 && static_cast<long>(out.size()) == maxsplit) {
      // The rest, with its trailing whitespace stripped, is the last part.
      size_t e = c.size();
      while (e > i && space_char(c[e - 1])) --e;
      out.push_back(join_views(c, i, e));
      break;
    }
    const size_t start = i;
    while (i < c.size() && !space_char(c[i])) ++i;
    out.push_back(join_views(c, start, i));
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                long maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (static_cast<long>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const std::vector<std::string_view> c = chars(s);
    size_t i = c.size();
    while (true) {
      while (i > 0 && space_char(c[i - 1])) --i;
      if (i == 0) break;
      if (static_cast<long>(out.size()) == maxsplit) {
        size_t b = 0;
        while (b < i && space_char(c[b])) ++b;
        out.push_back(join_views(c, b, i));
        break;
      }
      const size_t end = i;
      while (i > 0 && !space_char(c[i - 1])) --i;
      out.push_back(join_views(c, i, end));
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      out.emplace_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, long count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    const std::vector<std::string_view> c = chars(s);
    long n = 0;
    for (size_t i = 0; i <= c.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < c.size()) out += c[i];
    }
    return out;
  }
  size_t start = 0;
  long n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(from, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += to;
    start = at + from.size();
    ++n;
  }
  out += s.substr(start);
  return out;
}

size_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return length(s) + 1;
  size_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size()))
    ++n;
  return n;
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), to_upper);
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), to_lower);
  return out;
}

std::string title(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    c = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = ascii_alpha(c);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = to_upper(out[0]);
  return out;
}

bool is_space(std::string_view s) {
  const std::vector<std::string_view> c = chars(s);
  return !c.empty() && std::all_of(c.begin(), c.end(), space_char);
}

}  // namespace ts::jinja::py
