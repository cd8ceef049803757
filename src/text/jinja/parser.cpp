#include "text/jinja/parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>

#include "text/jinja/lexer.h"
#include "text/jinja/template_error.h"

namespace ts::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse() {
    Body body = parse_body({});
    if (cur().type != Tok::Eof) syntax_error(cur().line, "unexpected {% " + end_tag_ + " %}");
    return body;
  }

 private:
  // Counts nesting; deeper than kMaxParseDepth is an error.
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p(p) {
      if (++p.depth_ > kMaxParseDepth)
        syntax_error(p.cur().line, "nesting deeper than " + std::to_string(kMaxParseDepth));
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  // Counts the nodes a loop chains (a + b + c ..., x.a.b ..., x | f | g ...), each one level
  // deeper in the tree, until the enclosing function returns.
  struct ChainGuard {
    explicit ChainGuard(Parser& p) : p(p) {}
    void add() {
      ++n;
      if (++p.depth_ > kMaxParseDepth)
        syntax_error(p.cur().line, "nesting deeper than " + std::to_string(kMaxParseDepth));
    }
    ~ChainGuard() { p.depth_ -= n; }
    Parser& p;
    int n = 0;
  };

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t ahead = 1) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == Tok::Name && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Text:
        return "template text";
      case Tok::VarBegin:
        return "'{{'";
      case Tok::VarEnd:
        return "'}}'";
      case Tok::BlockBegin:
        return "'{%'";
      case Tok::BlockEnd:
        return "'%}'";
      case Tok::Eof:
        return "the end of the template";
      case Tok::String:
        return "a string";
      default:
        return "'" + t.text + "'";
    }
  }
  [[noreturn]] void unexpected(const std::string& wanted) const {
    syntax_error(cur().line, "expected " + wanted + ", found " + describe(cur()));
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) unexpected(std::string("'") + op + "'");
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) unexpected("a name");
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) unexpected("'%}'");
    next();
  }

  static ExprPtr make(ExprType type, int line) {
    auto e = std::make_unique<Expr>();
    e->type = type;
    e->line = line;
    return e;
  }

  // ---- statements ----

  // Statements up to a {% tag %} named in `ends` (consumed up to the tag's name, which is left in
  // end_tag_) or the end of the template when `ends` is empty.
  Body parse_body(std::initializer_list<const char*> ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (ends.size() != 0)
          syntax_error(t.line, std::string("missing {% ") + *ends.begin() + " %}");
        return body;
      }
      if (t.type == Tok::Text) {
        auto s = std::make_unique<Stmt>();
        s->type = StmtType::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->type = StmtType::Output;
        s->line = t.line;
        next();
        s->expr = parse_tuple(true);
        if (cur().type != Tok::VarEnd) unexpected("'}}'");
        next();
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        next();
        const std::string keyword = cur().type == Tok::Name ? cur().text : "";
        if (std::find_if(ends.begin(), ends.end(), [&](const char* e) { return keyword == e; }) !=
            ends.end()) {
          end_tag_ = keyword;
          next();
          return body;
        }
        parse_statement(body);
      } else {
        unexpected("template text or a tag");
      }
    }
  }

  void parse_statement(Body& body) {
    const int line = cur().line;
    const std::string keyword = cur().type == Tok::Name ? cur().text : "";
    auto s = std::make_unique<Stmt>();
    s->line = line;
    next();
    if (keyword == "if") {
      parse_if(*s);
    } else if (keyword == "for") {
      parse_for(*s);
    } else if (keyword == "set") {
      parse_set(*s);
    } else if (keyword == "macro") {
      parse_macro(*s);
    } else if (keyword == "filter") {
      s->type = StmtType::FilterBlock;
      parse_filter_chain(*s);
      expect_block_end();
      s->bodies.push_back(parse_body({"endfilter"}));
      expect_block_end();
    } else if (keyword == "break" || keyword == "continue") {
      if (loop_depth_ == 0) syntax_error(line, "{% " + keyword + " %} outside a loop");
      s->type = keyword == "break" ? StmtType::Break : StmtType::Continue;
      expect_block_end();
    } else if (keyword == "generation") {
      // transformers' assistant-mask tag: its body renders as is.
      expect_block_end();
      Body inner = parse_body({"endgeneration"});
      expect_block_end();
      for (auto& st : inner) body.push_back(std::move(st));
      return;
    } else if (keyword.empty()) {
      unexpected("a tag name");
    } else {
      syntax_error(line, "unsupported tag {% " + keyword + " %}");
    }
    body.push_back(std::move(s));
  }

  void parse_if(Stmt& s) {
    s.type = StmtType::If;
    s.conditions.push_back(parse_tuple(false));
    expect_block_end();
    while (true) {
      s.bodies.push_back(parse_body({"elif", "else", "endif"}));
      if (end_tag_ == "elif") {
        s.conditions.push_back(parse_tuple(false));
        expect_block_end();
      } else if (end_tag_ == "else") {
        expect_block_end();
        s.bodies.push_back(parse_body({"endif"}));
        expect_block_end();
        return;
      } else {
        expect_block_end();
        return;
      }
    }
  }

  // Names separated by commas, optionally in parentheses: for and set targets.
  std::vector<std::string> parse_targets() {
    const bool paren = skip_op("(");
    std::vector<std::string> names{expect_name()};
    while (skip_op(",")) {
      if (cur().type != Tok::Name) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  void parse_for(Stmt& s) {
    s.type = StmtType::For;
    s.targets = parse_targets();
    if (!skip_name("in")) unexpected("'in'");
    s.expr = parse_tuple(false);
    if (skip_name("if")) s.cond = parse_expression(true);
    if (is_name("recursive")) syntax_error(s.line, "recursive loops are not supported");
    expect_block_end();
    ++loop_depth_;
    s.bodies.push_back(parse_body({"else", "endfor"}));
    --loop_depth_;
    if (end_tag_ == "else") {
      expect_block_end();
      s.bodies.push_back(parse_body({"endfor"}));
    } else {
      s.bodies.emplace_back();
    }
    expect_block_end();
  }

  void parse_set(Stmt& s) {
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "." &&
        peek(2).type == Tok::Name) {
      s.targets.push_back(expect_name());
      next();
      s.name = expect_name();
    } else {
      s.targets = parse_targets();
    }
    if (skip_op("=")) {
      s.type = StmtType::Set;
      s.expr = parse_tuple(true);
      expect_block_end();
      return;
    }
    if (!s.name.empty() || s.targets.size() != 1)
      syntax_error(s.line, "a {% set %} block takes one name");
    s.type = StmtType::SetBlock;
    if (is_op("|")) parse_filter_chain(s);
    expect_block_end();
    s.bodies.push_back(parse_body({"endset"}));
    expect_block_end();
  }

  void parse_macro(Stmt& s) {
    s.type = StmtType::Macro;
    s.name = expect_name();
    expect_op("(");
    while (!skip_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (skip_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      s.params.push_back(std::move(p));
    }
    expect_block_end();
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s.bodies.push_back(parse_body({"endmacro"}));
    loop_depth_ = saved_loops;
    if (cur().type == Tok::Name) next();  // {% endmacro name %}
    expect_block_end();
  }

  // "| f(args) | g" (the first "|" optional, as after {% filter %}).
  void parse_filter_chain(Stmt& s) {
    do {
      s.filters.push_back(parse_filter(nullptr));
    } while (skip_op("|"));
  }

  // ---- expressions ----

  // Expressions separated by commas make a tuple (a list here).
  ExprPtr parse_tuple(bool with_condexpr) {
    const int line = cur().line;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto list = make(ExprType::List, line);
    list->name = "tuple";
    list->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (ends_tuple()) break;
      list->args.push_back(parse_expression(with_condexpr));
    }
    return list;
  }
  bool ends_tuple() const {
    return cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")") ||
           is_name("in") || is_name("if");
  }

  ExprPtr parse_expression(bool with_condexpr) {
    const int line = cur().line;
    ExprPtr e = parse_or();
    if (!with_condexpr) return e;
    ChainGuard chain(*this);
    while (skip_name("if")) {
      chain.add();
      auto c = make(ExprType::Condition, line);
      c->args.push_back(std::move(e));
      c->args.push_back(parse_or());
      c->args.push_back(skip_name("else") ? parse_expression(true) : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, int line) {
    auto b = make(ExprType::Binary, line);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    ChainGuard chain(*this);
    while (is_name("or")) {
      chain.add();
      const int line = cur().line;
      next();
      e = binary("or", std::move(e), parse_and(), line);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    ChainGuard chain(*this);
    while (is_name("and")) {
      chain.add();
      const int line = cur().line;
      next();
      e = binary("and", std::move(e), parse_not(), line);
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto n = make(ExprType::Not, cur().line);
      next();
      n->args.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    ChainGuard chain(*this);
    while (true) {
      chain.add();
      std::string op;
      if (cur().type == Tok::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(ExprType::Compare, line);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    ChainGuard chain(*this);
    while (is_op("+") || is_op("-")) {
      chain.add();
      const std::string op = cur().text;
      const int line = cur().line;
      next();
      e = binary(op, std::move(e), parse_concat(), line);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    ChainGuard chain(*this);
    while (is_op("~")) {
      chain.add();
      const int line = cur().line;
      next();
      e = binary("~", std::move(e), parse_math2(), line);
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    ChainGuard chain(*this);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.add();
      const std::string op = cur().text;
      const int line = cur().line;
      next();
      e = binary(op, std::move(e), parse_pow(), line);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    ChainGuard chain(*this);
    while (is_op("**")) {
      chain.add();
      const int line = cur().line;
      next();
      e = binary("**", std::move(e), parse_unary(true), line);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    const int line = cur().line;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = make(is_op("-") ? ExprType::Neg : ExprType::Pos, line);
      next();
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.type == Tok::Name) {
      const std::string n = t.text;
      next();
      auto lit = make(ExprType::Literal, line);
      if (n == "true" || n == "True")
        lit->value = Value(true);
      else if (n == "false" || n == "False")
        lit->value = Value(false);
      else if (n == "none" || n == "None")
        lit->value = Value(None{});
      else {
        auto name = make(ExprType::Name, line);
        name->name = n;
        return name;
      }
      return lit;
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) {  // adjacent literals join, as in Python
        s += cur().text;
        next();
      }
      auto lit = make(ExprType::Literal, line);
      lit->value = Value(std::move(s));
      return lit;
    }
    if (t.type == Tok::Int || t.type == Tok::Float) {
      auto lit = make(ExprType::Literal, line);
      errno = 0;
      if (t.type == Tok::Int) {
        const long long v = std::strtoll(t.text.c_str(), nullptr, 10);
        if (errno == ERANGE) syntax_error(line, "integer literal out of range: " + t.text);
        lit->value = Value(static_cast<int64_t>(v));
      } else {
        lit->value = Value(std::strtod(t.text.c_str(), nullptr));
      }
      next();
      return lit;
    }
    if (skip_op("(")) {
      if (skip_op(")")) {
        auto empty = make(ExprType::List, line);
        empty->name = "tuple";
        return empty;
      }
      ExprPtr e = parse_tuple(true);
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto list = make(ExprType::List, line);
      while (!skip_op("]")) {
        if (!list->args.empty()) {
          expect_op(",");
          if (skip_op("]")) break;
        }
        list->args.push_back(parse_expression(true));
      }
      return list;
    }
    if (skip_op("{")) {
      auto dict = make(ExprType::Dict, line);
      while (!skip_op("}")) {
        if (!dict->args.empty()) {
          expect_op(",");
          if (skip_op("}")) break;
        }
        dict->args.push_back(parse_expression(true));
        expect_op(":");
        dict->args.push_back(parse_expression(true));
      }
      return dict;
    }
    unexpected("an expression");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    ChainGuard chain(*this);
    while (true) {
      chain.add();
      const int line = cur().line;
      if (is_op(".")) {
        next();
        if (cur().type == Tok::Int) {
          auto item = make(ExprType::Item, line);
          item->args.push_back(std::move(e));
          auto idx = make(ExprType::Literal, line);
          idx->value = Value(static_cast<int64_t>(std::strtoll(cur().text.c_str(), nullptr, 10)));
          item->args.push_back(std::move(idx));
          next();
          e = std::move(item);
        } else {
          auto attr = make(ExprType::Attr, line);
          attr->args.push_back(std::move(e));
          attr->name = expect_name();
          e = std::move(attr);
        }
      } else if (is_op("[")) {
        next();
        e = parse_subscript(std::move(e), line);
      } else if (is_op("(")) {
        auto call = make(ExprType::Call, line);
        call->args.push_back(std::move(e));
        parse_call_args(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  // After "[": an index or a slice, then "]".
  ExprPtr parse_subscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    bool slice = false;
    for (int i = 0; i < 3; ++i) {
      if (!is_op(":") && !is_op("]")) parts[i] = parse_expression(true);
      if (i < 2 && skip_op(":")) {
        slice = true;
        continue;
      }
      break;
    }
    expect_op("]");
    if (!slice) {
      if (!parts[0]) syntax_error(line, "empty subscript []");
      auto item = make(ExprType::Item, line);
      item->args.push_back(std::move(target));
      item->args.push_back(std::move(parts[0]));
      return item;
    }
    auto s = make(ExprType::Slice, line);
    s->args.push_back(std::move(target));
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  // "(" args ")" into e.args (after what is already there) and e.kwargs.
  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) {
        expect_op(",");
        if (skip_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**"))
        syntax_error(cur().line, "*args and **kwargs are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string key = expect_name();
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty())
          syntax_error(cur().line, "a positional argument after a keyword one");
        e.args.push_back(parse_expression(true));
      }
    }
  }

  // A filter applied to `target` (null in {% filter %} and {% set %} blocks).
  ExprPtr parse_filter(ExprPtr target) {
    auto f = make(ExprType::Filter, cur().line);
    f->name = expect_name();
    while (is_op(".") && peek().type == Tok::Name) {
      next();
      f->name += "." + expect_name();
    }
    f->args.push_back(std::move(target));
    if (is_op("(")) parse_call_args(*f);
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    ChainGuard chain(*this);
    while (true) {
      chain.add();
      if (skip_op("|")) {
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        auto call = make(ExprType::Call, cur().line);
        call->args.push_back(std::move(e));
        parse_call_args(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_test(ExprPtr target) {
    auto t = make(ExprType::Test, cur().line);
    next();  // is
    t->negated = skip_name("not");
    t->name = expect_name();
    t->args.push_back(std::move(target));
    const Token& c = cur();
    if (is_op("(")) {
      parse_call_args(*t);
    } else if ((c.type == Tok::Name || c.type == Tok::String || c.type == Tok::Int ||
                c.type == Tok::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) syntax_error(c.line, "tests cannot be chained with 'is'");
      t->args.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::string end_tag_;
};

}  // namespace

Body parse_template(std::string_view source) {
  return Parser(lex(source)).parse();
}

}  // namespace ts::jinja
