// obj.name, obj[key], obj[a:b:c] and iteration, as jinja2's sandbox resolves them: obj.name tries
// the Python attribute (a method) before the key, obj[key] the key before the attribute; a
// missing key or index is an Undefined, and only reading from an Undefined is an error.
#include "text/jinja/builtins.h"
#include "text/jinja/methods.h"
#include "text/jinja/py_string.h"
#include "text/jinja/template_error.h"

namespace ts::jinja {
namespace {

Value missing(const Value& obj, const std::string& name) {
  return Value::undefined("'" + obj.type_name() + "' has no attribute '" + name + "'");
}

// Python's index for a sequence of `n`: negative counts from the end; nullopt when outside.
std::optional<size_t> resolve_index(int64_t i, size_t n) {
  if (i < 0) i += static_cast<int64_t>(n);
  if (i < 0 || static_cast<size_t>(i) >= n) return std::nullopt;
  return static_cast<size_t>(i);
}

int64_t slice_bound(const Value& v, const char* what, int line) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  render_error(line,
               std::string("slice ") + what + " must be an integer or none, not " + v.type_name());
}

// The positions obj[start:stop:step] takes from a sequence of `n` (Python's slice.indices).
std::vector<size_t> slice_positions(size_t n, const Value& start, const Value& stop,
                                    const Value& step, int line) {
  const int64_t len = static_cast<int64_t>(n);
  const int64_t st = step.is_none() ? 1 : slice_bound(step, "step", line);
  if (st == 0) render_error(line, "slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t dflt, const char* what) {
    if (v.is_none()) return dflt;
    int64_t i = slice_bound(v, what, line);
    if (i < 0) i += len;
    if (st > 0) return std::clamp<int64_t>(i, 0, len);
    return std::clamp<int64_t>(i, -1, len - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : len - 1, "start");
  const int64_t e = clamp(stop, st > 0 ? len : -1, "stop");
  std::vector<size_t> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(static_cast<size_t>(i));
  return out;
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) undefined_error(obj, line);
  if (auto method = bound_method(obj, name, line)) return *method;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
    return missing(obj, name);
  }
  if (obj.is_namespace()) {
    if (const Value* v = obj.as_namespace().attrs.find(name)) return *v;
    return missing(obj, name);
  }
  return missing(obj, name);
}

Value get_item(const Value& obj, const Value& key, int line) {
  if (obj.is_undefined()) undefined_error(obj, line);
  if (obj.is_generator()) render_error(line, "'generator' object is not subscriptable");
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    const int64_t i = key.is_int() ? key.as_int() : key.as_bool();
    if (obj.is_list()) {
      const auto at = resolve_index(i, obj.as_list().size());
      if (at) return obj.as_list()[*at];
    } else {
      const auto c = py::chars(obj.as_string());
      const auto at = resolve_index(i, c.size());
      if (at) return Value(std::string(c[*at]));
    }
    return Value::undefined("'" + obj.type_name() + "' has no element " + std::to_string(i));
  }
  if (key.is_string()) return get_attr(obj, key.as_string(), line);
  return Value::undefined("'" + obj.type_name() + "' has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step,
                int line) {
  if (obj.is_undefined()) undefined_error(obj, line);
  if (obj.is_generator()) render_error(line, "'generator' object is not subscriptable");
  if (obj.is_list()) {
    const List& l = obj.as_list();
    List out;
    for (size_t i : slice_positions(l.size(), start, stop, step, line)) out.push_back(l[i]);
    return Value(std::move(out));
  }
  if (obj.is_string()) {
    const auto c = py::chars(obj.as_string());
    std::string out;
    for (size_t i : slice_positions(c.size(), start, stop, step, line)) out += c[i];
    return Value(std::move(out));
  }
  render_error(line, "'" + obj.type_name() + "' cannot be sliced");
}

List iterate(const Value& v, int line) {
  if (v.is_undefined()) return {};
  if (v.is_list()) return v.as_list();
  if (v.is_dict()) {
    List keys;
    for (const auto& [k, x] : v.as_dict().entries) keys.push_back(k);
    return keys;
  }
  if (v.is_string()) {
    List out;
    for (std::string_view c : py::chars(v.as_string())) out.emplace_back(std::string(c));
    return out;
  }
  render_error(line, "'" + v.type_name() + "' is not iterable");
}

}  // namespace ts::jinja
