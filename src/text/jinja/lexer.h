// Splits a template into text and the tokens of its {{ }} and {% %} tags, with jinja2's
// whitespace rules as transformers configures them: trim_blocks (the newline after a block or
// comment tag is dropped), lstrip_blocks (the spaces before a block or comment tag on its own line
// are dropped), "-" in a tag strips the whitespace on that side, "+" keeps it; newlines are
// normalised to \n and one trailing newline of the template is dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ts::jinja {

enum class Tok {
  Text,        // literal template text (already stripped)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // text: the decoded value
  Int,
  Float,
  Op,  // text: the operator, e.g. "==", "(", "|"
  Eof,
};

struct Token {
  Tok type;
  std::string text;
  int line;
};

// A syntax error is a ts::Error naming the line.
std::vector<Token> lex(std::string_view source);

}  // namespace ts::jinja
