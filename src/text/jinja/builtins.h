// jinja2's operators, attribute access, filters, tests and globals, as Python evaluates them for a
// chat template. Each failure is a render_error naming the template line.
#pragma once

#include <string>

#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace ts::jinja {

// The error using an Undefined for more than printing or testing raises.
[[noreturn]] void undefined_error(const Value& v, int line);

// operators.cpp: + - * / // % ** ~ and the comparisons == != < <= > >= in "not in".
Value binary_op(const std::string& op, const Value& a, const Value& b, Interpreter& in, int line);
bool compare_op(const std::string& op, const Value& a, const Value& b, int line);
// Python's a < b for numbers, strings and lists; a TypeError otherwise.
bool less_than(const Value& a, const Value& b, int line);

// access.cpp: obj.name (a method of str, dict or list bound to obj, else the key), obj[key],
// obj[start:stop:step] and the items a for loop or filter iterates over.
Value get_attr(const Value& obj, const std::string& name, int line);
Value get_item(const Value& obj, const Value& key, int line);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step,
                int line);
List iterate(const Value& v, int line);

// filters.cpp, predicates.cpp: `v | name(args)` and `v is name(args)`.
Value apply_filter(const std::string& name, const Value& v, const CallArgs& args, Interpreter& in,
                   int line);
bool apply_test(const std::string& name, const Value& v, const CallArgs& args, Interpreter& in,
                int line);

// markupsafe's escape: & < > " ' as HTML entities.
std::string html_escape(const std::string& s);

// globals.cpp: range, namespace, dict, raise_exception, strftime_now.
Dict make_globals();

}  // namespace ts::jinja
