#include "text/jinja/template.h"

#include "text/jinja/builtins.h"
#include "text/jinja/parser.h"

namespace ts::jinja {

Template::Template(std::string_view source)
    : body_(std::make_shared<const Body>(parse_template(source))) {}

std::string Template::render(const Dict& context, const RenderOptions& options) const {
  auto globals = std::make_shared<Scope>();
  globals->vars = make_globals();
  auto vars = std::make_shared<Scope>();
  vars->vars = context;
  vars->parent = globals;
  // The template's own top-level variables live in a scope of their own.
  auto top = std::make_shared<Scope>();
  top->parent = vars;
  Interpreter in(options.limits, options.now, top);
  return in.render(*body_);
}

}  // namespace ts::jinja
