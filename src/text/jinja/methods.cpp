#include "text/jinja/methods.h"

#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/py_string.h"
#include "text/jinja/template_error.h"

namespace ts::jinja {
namespace {

using Method = Value (*)(const Value& self, const CallArgs& args, Interpreter& in, int line);

std::optional<std::string> opt_string(const CallArgs& a, size_t i, const char* name, int line) {
  const Value* v = a.get(i, name);
  if (v == nullptr || v->is_none()) return std::nullopt;
  if (!v->is_string())
    render_error(line,
                 std::string("argument '") + name + "' must be a string, not " + v->type_name());
  return v->as_string();
}

std::string req_string(const CallArgs& a, size_t i, const char* name, int line) {
  auto s = opt_string(a, i, name, line);
  if (!s) render_error(line, std::string("missing string argument '") + name + "'");
  return *s;
}

long opt_long(const CallArgs& a, size_t i, const char* name, long dflt, int line) {
  const Value* v = a.get(i, name);
  if (v == nullptr) return dflt;
  if (!v->is_int()) render_error(line, std::string("argument '") + name + "' must be an integer");
  return static_cast<long>(v->as_int());
}

Value string_list(std::vector<std::string> parts) {
  List out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value(std::move(out));
}

// startswith / endswith take a string or a tuple of strings.
bool affix_matches(const Value& self, const CallArgs& a, bool prefix, int line) {
  const Value* arg = a.get(0, prefix ? "prefix" : "suffix");
  if (arg == nullptr) render_error(line, "startswith/endswith needs an argument");
  const std::string& s = self.as_string();
  auto one = [&](const Value& v) {
    if (!v.is_string())
      render_error(line, "startswith/endswith takes strings, not " + v.type_name());
    const std::string& x = v.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg->is_list()) return std::any_of(arg->as_list().begin(), arg->as_list().end(), one);
  return one(*arg);
}

// str.format with {} / {0} / {name} fields and !s / !r conversions (no format specs).
std::string format(const std::string& fmt, const CallArgs& a, Interpreter& in, int line) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        render_error(line, "single '}' in a format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) render_error(line, "single '{' in a format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    bool use_repr = false;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      use_repr = field.substr(bang + 1) == "r";
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos)
      render_error(line, "format specs in str.format are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < a.positional.size() ? &a.positional[auto_index] : nullptr;
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = std::stoul(field);
      v = k < a.positional.size() ? &a.positional[k] : nullptr;
    } else {
      for (const auto& [name, value] : a.named)
        if (name == field) v = &value;
    }
    if (v == nullptr) render_error(line, "format string field {" + field + "} has no argument");
    out += use_repr ? v->repr() : v->str();
    in.check_size(out.size(), line);
  }
  return out;
}

Value str_method(const std::string& name, const Value& self, const CallArgs& a, Interpreter& in,
                 int line) {
  const std::string& s = self.as_string();
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return Value(py::strip(s, opt_string(a, 0, "chars", line), name != "rstrip", name != "lstrip"));
  if (name == "split" || name == "rsplit") {
    const auto sep = opt_string(a, 0, "sep", line);
    if (sep && sep->empty()) render_error(line, "empty separator");
    const long max = opt_long(a, 1, "maxsplit", -1, line);
    in.charge(s.size() / 64, line);
    return string_list(name == "split" ? py::split(s, sep, max) : py::rsplit(s, sep, max));
  }
  if (name == "splitlines") return string_list(py::splitlines(s));
  if (name == "startswith") return Value(affix_matches(self, a, true, line));
  if (name == "endswith") return Value(affix_matches(self, a, false, line));
  if (name == "upper") return Value(py::upper(s));
  if (name == "lower") return Value(py::lower(s));
  if (name == "title") return Value(py::title(s));
  if (name == "capitalize") return Value(py::capitalize(s));
  if (name == "replace") {
    const std::string from = req_string(a, 0, "old", line);
    const std::string to = req_string(a, 1, "new", line);
    const size_t n = py::count(s, from);
    if (to.size() > from.size()) in.check_size(s.size() + n * (to.size() - from.size()), line);
    return Value(py::replace(s, from, to, opt_long(a, 2, "count", -1, line)));
  }
  if (name == "find" || name == "rfind" || name == "index") {
    const std::string sub = req_string(a, 0, "sub", line);
    const size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index") render_error(line, "substring not found");
      return Value(int64_t{-1});
    }
    return Value(py::length(std::string_view(s).substr(0, at)));
  }
  if (name == "count") return Value(py::count(s, req_string(a, 0, "sub", line)));
  if (name == "join") {
    const Value* items = a.get(0, "iterable");
    if (items == nullptr) render_error(line, "join needs an argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(*items, line)) {
      if (!v.is_string()) render_error(line, "str.join takes strings, not " + v.type_name());
      if (!first) out += s;
      first = false;
      out += v.as_string();
      in.check_size(out.size(), line);
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(format(s, a, in, line));
  if (name == "isspace") return Value(py::is_space(s));
  const auto all = [&](auto pred) {
    return !s.empty() && std::all_of(s.begin(), s.end(),
                                     [&](char c) { return pred(static_cast<unsigned char>(c)); });
  };
  if (name == "isdigit") return Value(all([](unsigned char c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") return Value(all([](unsigned char c) { return std::isalpha(c) != 0; }));
  if (name == "isalnum") return Value(all([](unsigned char c) { return std::isalnum(c) != 0; }));
  if (name == "islower") return Value(s != py::upper(s) && s == py::lower(s));
  if (name == "isupper") return Value(s != py::lower(s) && s == py::upper(s));
  render_error(line, "unknown str method '" + name + "'");
}

Value dict_method(const std::string& name, const Value& self, const CallArgs& a, int line) {
  const Dict& d = self.as_dict();
  if (name == "get") {
    const Value* key = a.get(0, "key");
    if (key == nullptr) render_error(line, "dict.get needs a key");
    if (const Value* v = d.find(*key)) return *v;
    const Value* dflt = a.get(1, "default");
    return dflt != nullptr ? *dflt : Value(None{});
  }
  List out;
  for (const auto& [k, v] : d.entries) {
    if (name == "keys")
      out.push_back(k);
    else if (name == "values")
      out.push_back(v);
    else
      out.push_back(Value::tuple(List{k, v}));  // items
  }
  return Value(std::move(out));
}

bool is_one_of(const std::string& name, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

}  // namespace

std::optional<Value> bound_method(const Value& obj, const std::string& name, int line) {
  const char* type = nullptr;
  if (obj.is_string()) {
    if (!is_one_of(name, {"strip",      "lstrip",     "rstrip",   "split",   "rsplit",
                          "splitlines", "startswith", "endswith", "upper",   "lower",
                          "title",      "capitalize", "replace",  "find",    "rfind",
                          "index",      "count",      "join",     "format",  "isspace",
                          "isdigit",    "isalpha",    "isalnum",  "islower", "isupper"}))
      return std::nullopt;
    return Value(Callable{"str." + name, [obj, name, line](const CallArgs& a, Interpreter& in) {
                            return str_method(name, obj, a, in, line);
                          }});
  }
  if (obj.is_dict()) {
    if (is_one_of(name, {"get", "items", "keys", "values"}))
      return Value(Callable{"dict." + name, [obj, name, line](const CallArgs& a, Interpreter&) {
                              return dict_method(name, obj, a, line);
                            }});
    if (is_one_of(name, {"pop", "popitem", "setdefault", "update", "clear"})) type = "dict";
  }
  if (obj.is_list() &&
      is_one_of(name, {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"}))
    type = "list";
  if (type != nullptr)
    render_error(line, "access to attribute '" + name + "' of '" + type +
                           "' object is unsafe (a template cannot change it)");
  return std::nullopt;
}

}  // namespace ts::jinja
