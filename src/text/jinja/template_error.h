// The two ways a template fails, as one-line ts::Errors that name the template line: a syntax
// error (the model ships a template this engine cannot read: Unsupported) and an error while
// rendering (raise_exception, an undefined name used, a limit reached: Input, since it is the
// conversation the template refuses).
#pragma once

#include <string>

#include "core/error.h"

namespace ts::jinja {

[[noreturn]] inline void syntax_error(int line, const std::string& what) {
  fail(ErrorKind::Unsupported, "chat template line " + std::to_string(line) + ": " + what);
}

[[noreturn]] inline void render_error(int line, const std::string& what) {
  fail(ErrorKind::Input, "chat template line " + std::to_string(line) + ": " + what);
}

}  // namespace ts::jinja
