// A Jinja2 template engine for chat templates: the subset of jinja2 that the templates models
// ship use (control flow, macros, filters, tests, string and dict methods, namespace, loop
// variables, slicing), rendered the way transformers' apply_chat_template renders them
// (trim_blocks, lstrip_blocks, an immutable sandbox, raise_exception, strftime_now, its tojson).
//
//   Template t(source);                                  // syntax errors: ErrorKind::Unsupported
//   std::string text = t.render(context, {});           // render errors: ErrorKind::Input
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace ts::jinja {

struct RenderOptions {
  RenderLimits limits;
  std::time_t now = std::time(nullptr);  // what strftime_now formats (local time)
};

class Template {
 public:
  explicit Template(std::string_view source);

  // `context`: the variables (messages, tools, add_generation_prompt, bos_token, ...).
  std::string render(const Dict& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const Body> body_;  // shared: a Template is cheap to copy
};

}  // namespace ts::jinja
