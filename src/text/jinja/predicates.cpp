// jinja2's tests (`x is defined`, `x is string`, ...), with Python's type rules: a bool is a
// number but not an integer, an Undefined is iterable and a sequence.
#include "text/jinja/builtins.h"
#include "text/jinja/py_string.h"
#include "text/jinja/template_error.h"

namespace ts::jinja {
namespace {

const Value& operand(const CallArgs& args, const std::string& test, int line) {
  if (args.positional.empty()) render_error(line, "test '" + test + "' needs an argument");
  return args.positional[0];
}

int64_t integer_operand(const Value& v, const std::string& test, int line) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  render_error(line, "test '" + test + "' needs an integer, not " + v.type_name());
}

}  // namespace

bool apply_test(const std::string& name, const Value& v, const CallArgs& args, Interpreter&,
                int line) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable" || name == "sequence")
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return v.is_callable();
  if (name == "lower") return v.is_string() && py::lower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && py::upper(v.as_string()) == v.as_string();
  if (name == "eq" || name == "equalto" || name == "==") return v == operand(args, name, line);
  if (name == "ne" || name == "!=") return !(v == operand(args, name, line));
  if (name == "lt" || name == "lessthan" || name == "<")
    return less_than(v, operand(args, name, line), line);
  if (name == "gt" || name == "greaterthan" || name == ">")
    return less_than(operand(args, name, line), v, line);
  if (name == "le" || name == "<=") return !less_than(operand(args, name, line), v, line);
  if (name == "ge" || name == ">=") return !less_than(v, operand(args, name, line), line);
  if (name == "in") return compare_op("in", v, operand(args, name, line), line);
  if (name == "sameas") {
    const Value& o = operand(args, name, line);
    if (v.is_none() || v.is_bool()) return v.is_none() ? o.is_none() : (o.is_bool() && o == v);
    return v == o && !v.is_number() && !v.is_string();
  }
  if (name == "odd") return integer_operand(v, name, line) % 2 != 0;
  if (name == "even") return integer_operand(v, name, line) % 2 == 0;
  if (name == "divisibleby") {
    const int64_t d = integer_operand(operand(args, name, line), name, line);
    if (d == 0) render_error(line, "divisibleby 0");
    return integer_operand(v, name, line) % d == 0;
  }
  if (name == "escaped") return false;
  render_error(line, "no test named '" + name + "'");
}

}  // namespace ts::jinja
