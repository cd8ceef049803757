// The Python methods a template may call on a value: str's (strip, split, format, ...), dict's
// get / items / keys / values. The methods that change a list or dict (append, pop, update, ...)
// are refused, as jinja2's immutable sandbox refuses them.
#pragma once

#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace ts::jinja {

// obj.name bound to obj when it is a method of obj's type, else nullopt.
std::optional<Value> bound_method(const Value& obj, const std::string& name, int line);

}  // namespace ts::jinja
