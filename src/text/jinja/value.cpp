#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace ts::jinja {

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value v) {
  for (auto& [k, old] : entries)
    if (k == key) {
      old = std::move(v);
      return;
    }
  entries.emplace_back(std::move(key), std::move(v));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : named)
    if (k == name) return &v;
  return nullptr;
}

namespace {

int nesting(int child_depth) {
  if (child_depth + 1 > kMaxNesting)
    fail(ErrorKind::Input,
         "chat template: lists and dicts nested deeper than " + std::to_string(kMaxNesting));
  return child_depth + 1;
}

}  // namespace

Value::Value(List l) {
  int d = 0;
  for (const Value& v : l) d = std::max(d, v.depth_);
  depth_ = nesting(d);
  v_ = std::make_shared<const List>(std::move(l));
}

Value::Value(Dict dict) {
  int d = 0;
  for (const auto& [k, v] : dict.entries) d = std::max(d, v.depth_);
  depth_ = nesting(d);
  v_ = std::make_shared<const Dict>(std::move(dict));
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.flavor_ = Flavor::Markup;
  return v;
}

Value Value::tuple(List l) {
  Value v(std::move(l));
  v.flavor_ = Flavor::Tuple;
  return v;
}

Value Value::generator(List l) {
  Value v(std::move(l));
  v.flavor_ = Flavor::Generator;
  return v;
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(v_);
  if (is_int()) return static_cast<double>(as_int());
  return as_bool() ? 1.0 : 0.0;
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return as_double() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_generator()) return true;
  if (is_list()) return !as_list().empty();
  if (is_dict()) return !as_dict().entries.empty();
  return true;
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  // The shortest round-trip digits, then Python's layout: positional for exponents -4..15.
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  if (exp < -4 || exp >= 16) {
    std::string mant = digits.substr(0, 1);
    if (digits.size() > 1) mant += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return sign + mant + ebuf;
  }
  if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t int_len = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_len)
    return sign + digits + std::string(int_len - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

namespace {

std::string repr_string(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + q;
}

}  // namespace

std::string Value::repr() const {
  if (is_string()) return repr_string(as_string());
  if (is_undefined()) return "Undefined";
  if (is_generator()) return "<generator object>";
  if (is_list()) {
    const bool tuple = flavor_ == Flavor::Tuple;
    std::string out = tuple ? "(" : "[";
    for (const Value& v : as_list()) {
      if (out.size() > 1) out += ", ";
      out += v.repr();
    }
    if (tuple && as_list().size() == 1) out += ",";
    return out + (tuple ? ")" : "]");
  }
  if (is_dict()) {
    std::string out = "{";
    for (const auto& [k, v] : as_dict().entries) {
      if (out.size() > 1) out += ", ";
      out += k.repr() + ": " + v.repr();
    }
    return out + "}";
  }
  return str();
}

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return python_float(as_double());
  if (is_string()) return as_string();
  if (is_namespace()) return "<Namespace>";  // its attributes may hold the namespace itself
  if (is_callable()) return "<function " + as_callable().name + ">";
  return repr();
}

std::string Value::type_name() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "None";
  if (is_bool()) return "bool object";
  if (is_int()) return "int object";
  if (is_float()) return "float object";
  if (is_string()) return "str object";
  if (is_generator()) return "generator object";
  if (is_list()) return "list object";
  if (is_dict()) return "dict object";
  if (is_namespace()) return "Namespace object";
  return "function object";
}

bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    const int64_t x = a.is_int() ? a.as_int() : a.as_bool();
    const int64_t y = b.is_int() ? b.as_int() : b.as_bool();
    return x == y;
  }
  if (a.v_.index() != b.v_.index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_string()) return a.as_string() == b.as_string();
  if (a.is_list()) return a.as_list() == b.as_list();
  if (a.is_dict()) {
    const Dict& x = a.as_dict();
    const Dict& y = b.as_dict();
    if (x.entries.size() != y.entries.size()) return false;
    for (const auto& [k, v] : x.entries) {
      const Value* w = y.find(k);
      if (w == nullptr || !(*w == v)) return false;
    }
    return true;
  }
  // Namespaces and callables: the same object.
  if (a.is_namespace()) return &a.as_namespace() == &b.as_namespace();
  return &a.as_callable() == &b.as_callable();
}

}  // namespace ts::jinja
