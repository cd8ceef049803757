// Builds the statement tree of a template from its tokens, with jinja2's grammar and operator
// precedence. Nesting deeper than kMaxParseDepth is a syntax error, so that a hostile template
// cannot exhaust the stack of the parser or of the interpreter walking the tree.
#pragma once

#include <string_view>

#include "text/jinja/ast.h"

namespace ts::jinja {

constexpr int kMaxParseDepth = 128;

Body parse_template(std::string_view source);

}  // namespace ts::jinja
