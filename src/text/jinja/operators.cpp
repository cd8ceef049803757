// Python's arithmetic, concatenation and comparison on template values. Integers are 64-bit
// here (Python's are unbounded): an overflow is an error rather than a wrong number.
#include <cmath>

#include "text/jinja/builtins.h"
#include "text/jinja/template_error.h"

namespace ts::jinja {

void undefined_error(const Value& v, int line) {
  render_error(line, v.undefined_hint());
}

namespace {

bool integral(const Value& v) {
  return v.is_int() || v.is_bool();
}
int64_t int_of(const Value& v) {
  return v.is_int() ? v.as_int() : v.as_bool();
}

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b, int line) {
  render_error(line, "unsupported operand types for " + op + ": '" + a.type_name() + "' and '" +
                         b.type_name() + "'");
}

[[noreturn]] void overflow(int line) {
  render_error(line, "integer overflow");
}

Value repeat(const Value& seq, int64_t times, Interpreter& in, int line) {
  const size_t n = times > 0 ? static_cast<size_t>(times) : 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (n != 0 && s.size() > 0)
      in.check_size(s.size() > SIZE_MAX / n ? SIZE_MAX : s.size() * n, line);
    in.charge(s.size() * n / 1024 + 1, line);
    std::string out;
    for (size_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const List& l = seq.as_list();
  if (n != 0 && !l.empty()) in.check_size(l.size() > SIZE_MAX / n ? SIZE_MAX : l.size() * n, line);
  in.charge(l.size() * n + 1, line);
  List out;
  for (size_t i = 0; i < n; ++i) out.insert(out.end(), l.begin(), l.end());
  return Value(std::move(out));
}

Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
  if (integral(a) && integral(b)) {
    const int64_t x = int_of(a);
    const int64_t y = int_of(b);
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) overflow(line);
      return Value(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) overflow(line);
      return Value(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) overflow(line);
      return Value(r);
    }
    if (op == "/") {
      if (y == 0) render_error(line, "division by zero");
      return Value(static_cast<double>(x) / static_cast<double>(y));
    }
    if (op == "//" || op == "%") {
      if (y == 0) render_error(line, "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) overflow(line);
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors
        --q;
        m += y;
      }
      return Value(op == "//" ? q : m);
    }
    // **
    if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
    int64_t base = x;
    int64_t result = 1;
    for (int64_t e = y; e > 0; e >>= 1) {
      if ((e & 1) && __builtin_mul_overflow(result, base, &result)) overflow(line);
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) overflow(line);
    }
    return Value(result);
  }
  const double x = a.as_double();
  const double y = b.as_double();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  if (y == 0) render_error(line, "float division by zero");
  if (op == "/") return Value(x / y);
  const double q = std::floor(x / y);
  if (op == "//") return Value(q);
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return Value(m);
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b, Interpreter& in, int line) {
  if (op == "~") {
    std::string s = a.str();
    const std::string t = b.str();
    in.check_size(s.size() + t.size(), line);
    in.charge((s.size() + t.size()) / 1024, line);
    return Value(s + t);
  }
  if (a.is_undefined()) undefined_error(a, line);
  if (b.is_undefined()) undefined_error(b, line);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b, line);
  if (op == "+") {
    if (a.is_string() && b.is_string() && (a.is_markup() || b.is_markup())) {
      // Markup + str escapes the plain side (either way round) and stays Markup.
      const std::string x = a.is_markup() ? a.as_string() : html_escape(a.as_string());
      const std::string y = b.is_markup() ? b.as_string() : html_escape(b.as_string());
      in.check_size(x.size() + y.size(), line);
      return Value::markup(x + y);
    }
    if (a.is_string() && b.is_string()) {
      in.check_size(a.as_string().size() + b.as_string().size(), line);
      in.charge((a.as_string().size() + b.as_string().size()) / 1024, line);
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && !a.is_generator() && !b.is_generator()) {
      in.check_size(a.as_list().size() + b.as_list().size(), line);
      in.charge(a.as_list().size() + b.as_list().size(), line);
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
    if (a.is_string())
      render_error(line, "can only concatenate str (not \"" + b.type_name() + "\") to str");
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && integral(b)) return repeat(a, int_of(b), in, line);
    if ((b.is_string() || b.is_list()) && integral(a)) return repeat(b, int_of(a), in, line);
  }
  if (op == "%" && a.is_string())
    render_error(line, "printf-style string formatting (str % args) is not supported");
  bad_operands(op, a, b, line);
}

bool less_than(const Value& a, const Value& b, int line) {
  if (a.is_undefined()) undefined_error(a, line);
  if (b.is_undefined()) undefined_error(b, line);
  if (a.is_number() && b.is_number()) {
    if (integral(a) && integral(b)) return int_of(a) < int_of(b);
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!(x[i] == y[i])) return less_than(x[i], y[i], line);
    }
    return x.size() < y.size();
  }
  render_error(line,
               "'<' not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
}

namespace {

bool contains(const Value& container, const Value& item, int line) {
  if (container.is_undefined()) return false;
  if (container.is_string()) {
    if (!item.is_string())
      render_error(line,
                   "'in <string>' requires a string as left operand, not " + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.as_list())
      if (v == item) return true;
    return false;
  }
  if (container.is_dict()) return container.as_dict().find(item) != nullptr;
  render_error(line, "argument of type '" + container.type_name() + "' is not iterable");
}

}  // namespace

bool compare_op(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "==") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "<") return less_than(a, b, line);
  if (op == ">") return less_than(b, a, line);
  if (op == "<=") return !less_than(b, a, line);
  if (op == ">=") return !less_than(a, b, line);
  if (op == "in") return contains(b, a, line);
  return !contains(b, a, line);  // not in
}

}  // namespace ts::jinja
