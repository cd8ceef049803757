// One error type for the whole runtime: a kind (which decides the CLI's exit code) and a message
// that names the file, tensor or field at fault.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace ts {

// `s` with every control byte written as \xNN, so that it prints as one inert line.
std::string one_line(std::string_view s);

enum class ErrorKind {
  Usage,        // bad flag or argument: exit 1
  Model,        // the model can't be opened (I/O, malformed, unsupported): exit 2
  Unsupported,  // a valid file asking for something we don't do: exit 2
  Budget,       // a memory budget that cannot work: exit 2
  Input,        // bad runtime input (prompt longer than context, bad token id): exit 1
  Runtime,      // failure while running (expert read failed mid-generation): exit 3
};

// The message is kept to one inert line: errors quote names, keys and token texts straight from
// model files, and a hostile file could put line breaks or terminal escapes in them.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(one_line(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) {
  throw Error(kind, message);
}

int exit_code_for(ErrorKind kind);

}  // namespace ts
