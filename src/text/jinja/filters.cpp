// jinja2's built-in filters that chat templates use, with transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "text/jinja/builtins.h"
#include "text/jinja/json_value.h"
#include "text/jinja/py_string.h"
#include "text/jinja/template_error.h"

namespace ts::jinja {
namespace {

struct FilterCall {
  const Value& v;
  const CallArgs& args;
  Interpreter& in;
  int line;

  const Value* arg(size_t i, const char* name) const { return args.get(i, name); }
  bool flag(size_t i, const char* name) const {
    const Value* a = arg(i, name);
    return a != nullptr && a->truthy();
  }
  std::optional<std::string> opt_string(size_t i, const char* name) const {
    const Value* a = arg(i, name);
    if (a == nullptr || a->is_none()) return std::nullopt;
    return a->str();
  }
};

// The value of `item`'s attribute path "a.b" (or index "0"), as jinja2's make_attrgetter.
Value attribute(const Value& item, const std::string& path, int line) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot - start);
    const bool index = !part.empty() && std::all_of(part.begin(), part.end(),
                                                    [](char c) { return c >= '0' && c <= '9'; });
    v = index ? get_item(v, Value(static_cast<int64_t>(std::stoll(part))), line)
              : get_item(v, Value(part), line);
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// The sort key of jinja2's case-insensitive filters: strings lowered.
Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py::lower(v.as_string()));
  return v;
}

Value key_of(const Value& item, const FilterCall& f, size_t attr_index) {
  const Value* attr = f.arg(attr_index, "attribute");
  Value k = attr != nullptr && !attr->is_none() ? attribute(item, attr->str(), f.line) : item;
  return fold_case(k, f.flag(attr_index - 1, "case_sensitive"));
}

Value sort(const FilterCall& f) {
  List items = iterate(f.v, f.line);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(key_of(items[i], f, 2), i);
  const bool reverse = f.flag(0, "reverse");
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less_than(b.first, a.first, f.line) : less_than(a.first, b.first, f.line);
  });
  List out;
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return Value(std::move(out));
}

Value dictsort(const FilterCall& f) {
  if (!f.v.is_dict()) render_error(f.line, "dictsort needs a dict, not " + f.v.type_name());
  const bool case_sensitive = f.flag(0, "case_sensitive");
  const auto by = f.opt_string(1, "by").value_or("key");
  if (by != "key" && by != "value") render_error(f.line, "dictsort: by must be 'key' or 'value'");
  const bool reverse = f.flag(2, "reverse");
  std::vector<std::pair<Value, Value>> entries = f.v.as_dict().entries;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
    const Value x = fold_case(by == "key" ? a.first : a.second, case_sensitive);
    const Value y = fold_case(by == "key" ? b.first : b.second, case_sensitive);
    return reverse ? less_than(y, x, f.line) : less_than(x, y, f.line);
  });
  List out;
  for (auto& [k, v] : entries) out.push_back(Value::tuple(List{k, v}));
  return Value(std::move(out));
}

Value unique(const FilterCall& f) {
  List out;
  std::vector<Value> seen;
  for (const Value& item : iterate(f.v, f.line)) {
    const Value k = key_of(item, f, 1);
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
    f.in.charge(seen.size() / 64, f.line);
    seen.push_back(k);
    out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value min_max(const FilterCall& f, bool max) {
  const List items = iterate(f.v, f.line);
  if (items.empty()) return Value::undefined("no items for min / max");
  size_t best = 0;
  Value best_key = key_of(items[0], f, 1);
  for (size_t i = 1; i < items.size(); ++i) {
    const Value k = key_of(items[i], f, 1);
    if (max ? less_than(best_key, k, f.line) : less_than(k, best_key, f.line)) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

// select / reject / selectattr / rejectattr.
Value select(const FilterCall& f, bool keep, bool by_attribute) {
  size_t next = 0;
  std::string attr;
  if (by_attribute) {
    const Value* a = f.arg(next++, "attribute");
    if (a == nullptr) render_error(f.line, "selectattr / rejectattr need an attribute");
    attr = a->str();
  }
  const Value* test = f.arg(next++, "");
  CallArgs test_args;
  for (size_t i = next; i < f.args.positional.size(); ++i)
    test_args.positional.push_back(f.args.positional[i]);
  List out;
  if (!f.v.truthy()) return Value::generator(std::move(out));  // jinja2 skips a false value
  for (const Value& item : iterate(f.v, f.line)) {
    f.in.charge(1, f.line);
    const Value x = by_attribute ? attribute(item, attr, f.line) : item;
    const bool pass =
        test == nullptr ? x.truthy() : apply_test(test->str(), x, test_args, f.in, f.line);
    if (pass == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value map(const FilterCall& f) {
  List out;
  if (!f.v.truthy()) return Value::generator(std::move(out));
  const Value* attr = f.arg(99, "attribute");
  if (attr != nullptr) {
    const Value* dflt = f.arg(99, "default");
    for (const Value& item : iterate(f.v, f.line)) {
      Value x = attribute(item, attr->str(), f.line);
      out.push_back(x.is_undefined() && dflt != nullptr ? *dflt : x);
    }
    return Value::generator(std::move(out));
  }
  if (f.args.positional.empty()) render_error(f.line, "map needs a filter name or attribute=");
  const std::string filter = f.args.positional[0].str();
  CallArgs rest;
  rest.positional.assign(f.args.positional.begin() + 1, f.args.positional.end());
  rest.named = f.args.named;
  for (const Value& item : iterate(f.v, f.line)) {
    f.in.charge(1, f.line);
    out.push_back(apply_filter(filter, item, rest, f.in, f.line));
  }
  return Value::generator(std::move(out));
}

Value join(const FilterCall& f) {
  const std::string sep = f.opt_string(0, "d").value_or("");
  const Value* attr = f.arg(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(f.v, f.line)) {
    if (!first) out += sep;
    first = false;
    out += (attr != nullptr ? attribute(item, attr->str(), f.line) : item).str();
    f.in.check_size(out.size(), f.line);
  }
  return Value(std::move(out));
}

Value indent(const FilterCall& f) {
  const Value* w = f.arg(0, "width");
  std::string pad = w == nullptr ? "    " : w->is_string() ? w->as_string() : "";
  if (w != nullptr && w->is_int()) {
    const int64_t n = std::clamp<int64_t>(w->as_int(), 0, 1 << 16);
    pad.assign(static_cast<size_t>(n), ' ');
  }
  const std::string s = f.v.str() + "\n";
  std::vector<std::string> lines = py::splitlines(s);
  std::string out;
  if (f.flag(2, "blank")) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i > 0 ? "\n" + pad : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n" + (lines[i].empty() ? "" : pad) + lines[i];
      f.in.check_size(out.size(), f.line);
    }
  }
  if (f.flag(1, "first")) out = pad + out;
  return Value(std::move(out));
}

Value tojson(const FilterCall& f) {
  DumpOptions o;
  const Value* ind = f.arg(1, "indent");
  if (ind != nullptr && !ind->is_none()) {
    if (ind->is_int())
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(ind->as_int(), 0, 64)), ' ');
    else
      o.indent = ind->str();
    o.item_separator = ",";
  }
  if (const Value* sep = f.arg(2, "separators"); sep != nullptr && sep->is_list()) {
    if (sep->as_list().size() != 2) render_error(f.line, "tojson separators must be a pair");
    o.item_separator = sep->as_list()[0].str();
    o.key_separator = sep->as_list()[1].str();
  }
  o.sort_keys = f.flag(3, "sort_keys");
  o.ensure_ascii = f.flag(0, "ensure_ascii");
  std::string bad;
  auto text = dump_json(f.v, o, bad);
  if (!text) render_error(f.line, "Object of type " + bad + " is not JSON serializable");
  f.in.check_size(text->size(), f.line);
  return Value(std::move(*text));
}

Value to_int(const FilterCall& f) {
  const Value* dflt = f.arg(0, "default");
  const Value fallback = dflt != nullptr ? *dflt : Value(int64_t{0});
  const Value& v = f.v;
  if (v.is_int()) return v;
  if (v.is_bool()) return Value(int64_t{v.as_bool()});
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    const std::string s = py::strip(v.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value(int64_t{i});
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return Value(static_cast<int64_t>(d));
  }
  return fallback;
}

Value to_float(const FilterCall& f) {
  const Value* dflt = f.arg(0, "default");
  const Value fallback = dflt != nullptr ? *dflt : Value(0.0);
  if (f.v.is_number()) return Value(f.v.as_double());
  if (f.v.is_string()) {
    const std::string s = py::strip(f.v.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(d);
  }
  return fallback;
}

Value length(const FilterCall& f) {
  const Value& v = f.v;
  if (v.is_undefined()) return Value(int64_t{0});
  if (v.is_generator()) render_error(f.line, "object of type 'generator' has no len()");
  if (v.is_string()) return Value(py::length(v.as_string()));
  if (v.is_list()) return Value(v.as_list().size());
  if (v.is_dict()) return Value(v.as_dict().entries.size());
  render_error(f.line, "object of type '" + v.type_name() + "' has no len()");
}

Value items(const FilterCall& f) {
  if (f.v.is_undefined()) return Value::generator(List{});
  if (!f.v.is_dict()) render_error(f.line, "items needs a mapping, not " + f.v.type_name());
  List out;
  for (const auto& [k, v] : f.v.as_dict().entries) out.push_back(Value::tuple(List{k, v}));
  return Value::generator(std::move(out));
}

Value reverse(const FilterCall& f) {
  if (f.v.is_string()) {
    auto c = py::chars(f.v.as_string());
    std::string out;
    for (auto it = c.rbegin(); it != c.rend(); ++it) out += *it;
    return Value(std::move(out));
  }
  List l = iterate(f.v, f.line);
  std::reverse(l.begin(), l.end());
  return Value::generator(std::move(l));  // Python's reversed()
}

Value sum(const FilterCall& f) {
  const Value* attr = f.arg(0, "attribute");
  const Value* start = f.arg(1, "start");
  Value total = start != nullptr ? *start : Value(int64_t{0});
  for (const Value& item : iterate(f.v, f.line))
    total = binary_op("+", total, attr != nullptr ? attribute(item, attr->str(), f.line) : item,
                      f.in, f.line);
  return total;
}

Value round(const FilterCall& f) {
  const Value* p = f.arg(0, "precision");
  const int64_t precision =
      p != nullptr && p->is_int() ? std::clamp<int64_t>(p->as_int(), -300, 300) : 0;
  const std::string method = f.opt_string(1, "method").value_or("common");
  if (!f.v.is_number()) render_error(f.line, "round needs a number, not " + f.v.type_name());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = f.v.as_double() * scale;
  double r = 0;
  if (method == "common")
    r = std::nearbyint(x);  // Python's round: halves to even
  else if (method == "ceil")
    r = std::ceil(x);
  else if (method == "floor")
    r = std::floor(x);
  else
    render_error(f.line, "round: method must be common, ceil or floor");
  return Value(r / scale);
}

Value string_filter(const std::string& name, const FilterCall& f) {
  const std::string s = f.v.str();
  if (name == "trim") return Value(py::strip(s, f.opt_string(0, "chars"), true, true));
  if (name == "upper") return Value(py::upper(s));
  if (name == "lower") return Value(py::lower(s));
  if (name == "capitalize") return Value(py::capitalize(s));
  if (name == "title") return Value(py::title(s));
  if (name == "string") return f.v.is_string() ? f.v : Value(s);
  if (name == "safe") return Value::markup(s);
  if (name == "e" || name == "escape") return f.v.is_markup() ? f.v : Value::markup(html_escape(s));
  if (name == "forceescape") return Value::markup(html_escape(s));
  if (name == "wordcount") return Value(py::split(s, std::nullopt, -1).size());
  // replace
  const auto from = f.opt_string(0, "old");
  const auto to = f.opt_string(1, "new");
  if (!from || !to) render_error(f.line, "replace needs old and new");
  const Value* count = f.arg(2, "count");
  const size_t n = py::count(s, *from);
  if (to->size() > from->size())
    f.in.check_size(s.size() + n * (to->size() - from->size()), f.line);
  return Value(
      py::replace(s, *from, *to, count != nullptr && count->is_int() ? count->as_int() : -1));
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value apply_filter(const std::string& name, const Value& v, const CallArgs& args, Interpreter& in,
                   int line) {
  const FilterCall f{v, args, in, line};
  if (name == "default" || name == "d") {
    const Value* dflt = f.arg(0, "default_value");
    const bool use = v.is_undefined() || (f.flag(1, "boolean") && !v.truthy());
    return use ? (dflt != nullptr ? *dflt : Value("")) : v;
  }
  if (name == "tojson") return tojson(f);
  if (name == "length" || name == "count") return length(f);
  if (name == "items") return items(f);
  if (name == "join") return join(f);
  if (name == "list") return Value(iterate(v, line));
  if (name == "first" || name == "last") {
    const List l = iterate(v, line);
    if (l.empty()) return Value::undefined("'" + v.type_name() + "' has no " + name + " item");
    return name == "first" ? l.front() : l.back();
  }
  if (name == "map") return map(f);
  if (name == "select" || name == "reject") return select(f, name == "select", false);
  if (name == "selectattr" || name == "rejectattr") return select(f, name == "selectattr", true);
  if (name == "sort") return sort(f);
  if (name == "dictsort") return dictsort(f);
  if (name == "unique") return unique(f);
  if (name == "min" || name == "max") return min_max(f, name == "max");
  if (name == "reverse") return reverse(f);
  if (name == "sum") return sum(f);
  if (name == "indent") return indent(f);
  if (name == "int") return to_int(f);
  if (name == "float") return to_float(f);
  if (name == "round") return round(f);
  if (name == "abs") {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_int() && v.as_int() != INT64_MIN)
      return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.is_bool()) return Value(int64_t{v.as_bool()});
    render_error(line, "bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "attr") {
    const Value* a = f.arg(0, "name");
    if (a == nullptr) render_error(line, "attr needs a name");
    return get_attr(v, a->str(), line);
  }
  if (name == "trim" || name == "upper" || name == "lower" || name == "capitalize" ||
      name == "title" || name == "string" || name == "safe" || name == "e" || name == "escape" ||
      name == "forceescape" || name == "wordcount" || name == "replace")
    return string_filter(name, f);
  render_error(line, "no filter named '" + name + "'");
}

}  // namespace ts::jinja
