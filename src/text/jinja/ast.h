// The parsed template: expressions and statements as the parser builds them and the interpreter
// walks them. Each node keeps its template line for error messages.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "text/jinja/value.h"

namespace ts::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprType {
  Literal,    // value
  Name,       // name
  List,       // args: the items; name "tuple" for a tuple
  Dict,       // args: key, value, key, value, ...
  Attr,       // args[0].name
  Item,       // args[0][args[1]]
  Slice,      // args[0][args[1]:args[2]:args[3]] (null where left out)
  Call,       // args[0](args[1..], kwargs)
  Filter,     // args[0] | name(args[1..], kwargs)
  Test,       // args[0] is [not] name(args[1..]); negated
  Not,        // not args[0]
  Neg,        // -args[0]
  Pos,        // +args[0]
  Binary,     // args[0] op args[1]: + - * / // % ** ~ and or in "not in"
  Compare,    // args[0] ops[0] args[1] ops[1] args[2] ... (== != < <= > >=)
  Condition,  // args[0] if args[1] else args[2] (args[2] null when left out)
};

struct Expr {
  ExprType type;
  int line = 0;
  Value value;                   // Literal
  std::string name;              // Name, Attr, Filter, Test; the operator of Binary
  std::vector<ExprPtr> args;     // see ExprType
  std::vector<std::string> ops;  // Compare's operators
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call, Filter, Test
  bool negated = false;                                 // Test
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class StmtType {
  Text,         // text
  Output,       // {{ expr }}
  If,           // conditions[i] -> bodies[i]; bodies.back() is the else branch when one more
  For,          // for targets in expr [if cond]: bodies[0]; bodies[1] the else branch
  Set,          // set targets = expr; or set targets[0].attr = expr (a namespace)
  SetBlock,     // set targets[0] [| filters] %}bodies[0]{% endset
  Macro,        // macro name(params) bodies[0]
  FilterBlock,  // filter filters: bodies[0]
  Break,
  Continue,
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null when required
};

struct Stmt {
  StmtType type;
  int line = 0;
  std::string text;                 // Text
  std::string name;                 // Macro's name; Set's namespace attribute
  ExprPtr expr;                     // Output, For's iterable, Set's value
  ExprPtr cond;                     // For's filter
  std::vector<ExprPtr> conditions;  // If
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // For, Set, SetBlock
  std::vector<MacroParam> params;    // Macro
  // SetBlock, FilterBlock: the filters as Filter expressions whose args[0] is null.
  std::vector<ExprPtr> filters;
};

}  // namespace ts::jinja
