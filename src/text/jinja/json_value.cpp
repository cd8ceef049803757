#include "text/jinja/json_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/utf8.h"

namespace ts::jinja {
namespace {

template <class Json>
Value convert(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value(None{});
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& x : j) l.push_back(convert(x));
      return Value(std::move(l));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      d.entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), convert(it.value()));
      return Value(std::move(d));
    }
    default:
      return Value(None{});  // binary values never come from JSON text
  }
}

void escape_code_point(uint32_t cp, std::string& out) {
  char buf[16];
  if (cp >= 0x10000) {
    cp -= 0x10000;
    std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
  } else {
    std::snprintf(buf, sizeof buf, "\\u%04x", cp);
  }
  out += buf;
}

void dump_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (ensure_ascii && u >= 0x80) {
      // A byte that starts no valid sequence is written as the code point of its own value.
      const size_t n = utf8_valid_prefix(s, i);
      escape_code_point(n > 0 ? utf8_decode_at(s, i, n) : u, out);
      i += n > 0 ? n - 1 : 0;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// json.dumps writes a non-string key as its JSON text.
std::string json_key(const Value& k) {
  if (k.is_string()) return k.as_string();
  if (k.is_none()) return "null";
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  return k.str();
}

bool dump(const Value& v, const DumpOptions& o, int level, std::string& out, std::string& bad) {
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const double d = v.as_double();
    if (std::isnan(d))
      out += "NaN";
    else if (std::isinf(d))
      out += d < 0 ? "-Infinity" : "Infinity";
    else
      out += python_float(d);
  } else if (v.is_string()) {
    dump_string(v.as_string(), o.ensure_ascii, out);
  } else if (v.is_generator()) {
    bad = "generator";
    return false;
  } else if (v.is_list() || v.is_dict()) {
    const bool list = v.is_list();
    const size_t n = list ? v.as_list().size() : v.as_dict().entries.size();
    if (n == 0) {
      out += list ? "[]" : "{}";
      return true;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    if (!list) {
      for (const auto& [k, x] : v.as_dict().entries) entries.emplace_back(json_key(k), &x);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    std::string newline;
    if (o.indent) {
      newline = "\n";
      for (int i = 0; i <= level; ++i) newline += *o.indent;
    }
    out += list ? '[' : '{';
    out += newline;
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) out += o.item_separator + newline;
      if (list) {
        if (!dump(v.as_list()[i], o, level + 1, out, bad)) return false;
      } else {
        dump_string(entries[i].first, o.ensure_ascii, out);
        out += o.key_separator;
        if (!dump(*entries[i].second, o, level + 1, out, bad)) return false;
      }
    }
    if (o.indent) {
      out += '\n';
      for (int i = 0; i < level; ++i) out += *o.indent;
    }
    out += list ? ']' : '}';
  } else {
    bad = v.is_undefined() ? "Undefined" : v.type_name();
    return false;
  }
  return true;
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) {
  return convert(j);
}
Value from_json(const nlohmann::json& j) {
  return convert(j);
}

std::optional<std::string> dump_json(const Value& v, const DumpOptions& options,
                                     std::string& bad_type) {
  std::string out;
  if (!dump(v, options, 0, out, bad_type)) return std::nullopt;
  return out;
}

}  // namespace ts::jinja
