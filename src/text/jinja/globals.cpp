// The functions a chat template can call: jinja2's range, namespace and dict, and the two
// transformers adds, raise_exception and strftime_now.
#include <ctime>

#include "text/jinja/builtins.h"
#include "text/jinja/template_error.h"

namespace ts::jinja {
namespace {

// jinja2's sandbox refuses longer ranges (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

int64_t int_arg(const Value& v) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  fail(ErrorKind::Input, "chat template: range() takes integers, not " + v.type_name());
}

Value range(const CallArgs& a, Interpreter&) {
  const auto& p = a.positional;
  if (p.empty() || p.size() > 3)
    fail(ErrorKind::Input, "chat template: range() takes 1 to 3 integers");
  const int64_t start = p.size() == 1 ? 0 : int_arg(p[0]);
  const int64_t stop = int_arg(p.size() == 1 ? p[0] : p[1]);
  const int64_t step = p.size() == 3 ? int_arg(p[2]) : 1;
  if (step == 0) fail(ErrorKind::Input, "chat template: range() step must not be zero");
  const long double n = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                                 : (static_cast<long double>(start) - stop - step - 1) / -step;
  if (n > kMaxRange)
    fail(ErrorKind::Input, "chat template: range() longer than " + std::to_string(kMaxRange));
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
  return Value(std::move(out));
}

// dict(mapping, **kwargs), as namespace() and dict() take their contents.
Dict dict_of(const CallArgs& a, const char* what) {
  Dict d;
  if (!a.positional.empty()) {
    if (a.positional.size() > 1 || !a.positional[0].is_dict())
      fail(ErrorKind::Input, std::string("chat template: ") + what + "() takes one mapping");
    d = a.positional[0].as_dict();
  }
  for (const auto& [k, v] : a.named) d.set(k, v);
  return d;
}

Value strftime_now(const CallArgs& a, Interpreter& in) {
  if (a.positional.size() != 1 || !a.positional[0].is_string())
    fail(ErrorKind::Input, "chat template: strftime_now() takes one format string");
  const std::time_t now = in.now();
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof buf, a.positional[0].as_string().c_str(), &tm);
  return Value(std::string(buf, n));
}

}  // namespace

Dict make_globals() {
  Dict g;
  g.set("range", Value(Callable{"range", range}));
  g.set("namespace", Value(Callable{"namespace", [](const CallArgs& a, Interpreter& in) {
                                      return in.make_namespace(dict_of(a, "namespace"));
                                    }}));
  g.set("dict", Value(Callable{"dict", [](const CallArgs& a, Interpreter&) {
                                 return Value(dict_of(a, "dict"));
                               }}));
  g.set("raise_exception",
        Value(Callable{"raise_exception", [](const CallArgs& a, Interpreter&) -> Value {
                         const std::string msg = a.positional.empty() ? "" : a.positional[0].str();
                         fail(ErrorKind::Input, "chat template: " + msg);
                       }}));
  g.set("strftime_now", Value(Callable{"strftime_now", strftime_now}));
  return g;
}

}  // namespace ts::jinja
