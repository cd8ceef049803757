#include "text/jinja/interpreter.h"

#include <algorithm>
#include <climits>

#include "text/jinja/builtins.h"
#include "text/jinja/template_error.h"

namespace ts::jinja {

struct Interpreter::DepthGuard {
  DepthGuard(Interpreter& in, int line) : in(in) {
    if (++in.depth_ > in.limits_.max_depth)
      render_error(line,
                   "nesting or recursion deeper than " + std::to_string(in.limits_.max_depth));
  }
  ~DepthGuard() { --in.depth_; }
  Interpreter& in;
};

Interpreter::Interpreter(const RenderLimits& limits, std::time_t now,
                         std::shared_ptr<Scope> globals)
    : limits_(limits), now_(now), scope_(std::move(globals)) {}

Interpreter::~Interpreter() {
  for (const auto& weak : namespaces_)
    if (const auto ns = weak.lock()) ns->attrs.entries.clear();
}

std::string Interpreter::render(const Body& body) {
  std::string out;
  exec(body, out);
  return out;
}

void Interpreter::charge(uint64_t steps, int line) {
  steps_ += steps;
  if (steps_ > limits_.max_steps)
    render_error(
        line, "the template ran past its limit of " + std::to_string(limits_.max_steps) + " steps");
}

void Interpreter::check_size(size_t size, int line) const {
  if (size > limits_.max_output)
    render_error(line,
                 "the template built more than " + std::to_string(limits_.max_output) + " bytes");
}

Value Interpreter::make_namespace(Dict attrs) {
  auto ns = std::make_shared<Namespace>();
  ns->attrs = std::move(attrs);
  namespaces_.push_back(ns);
  return Value(std::move(ns));
}

void Interpreter::append(std::string& out, const std::string& text, int line) {
  check_size(out.size() + text.size(), line);
  charge(text.size() / 1024, line);
  out += text;
}

Value Interpreter::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s != nullptr; s = s->parent.get())
    if (const Value* v = s->vars.find(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

void Interpreter::assign(const std::string& name, Value v) {
  scope_->vars.set(name, std::move(v));
}

// ---- statements ----

Interpreter::Flow Interpreter::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, std::string& out) {
  DepthGuard guard(*this, s.line);
  switch (s.type) {
    case StmtType::Text:
      append(out, s.text, s.line);
      break;
    case StmtType::Output:
      append(out, eval(*s.expr).str(), s.line);
      break;
    case StmtType::If:
      for (size_t i = 0; i < s.bodies.size(); ++i)
        if (i >= s.conditions.size() || eval(*s.conditions[i]).truthy())
          return exec(s.bodies[i], out);
      break;
    case StmtType::For:
      return exec_for(s, out);
    case StmtType::Set:
      exec_set(s);
      break;
    case StmtType::SetBlock: {
      std::string text;
      exec(s.bodies[0], text);
      assign(s.targets[0], apply_filters(s.filters, Value(std::move(text))));
      break;
    }
    case StmtType::Macro:
      assign(s.name, define_macro(s));
      break;
    case StmtType::FilterBlock: {
      std::string text;
      exec(s.bodies[0], text);
      append(out, apply_filters(s.filters, Value(std::move(text))).str(), s.line);
      break;
    }
    case StmtType::Break:
      return Flow::Break;
    case StmtType::Continue:
      return Flow::Continue;
  }
  return Flow::Normal;
}

namespace {

void unpack_into(Dict& vars, const std::vector<std::string>& targets, const Value& v, int line) {
  if (targets.size() == 1) {
    vars.set(targets[0], v);
    return;
  }
  if (!v.is_list() || v.as_list().size() != targets.size())
    render_error(line, "cannot unpack " + v.type_name() + " into " +
                           std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < targets.size(); ++i) vars.set(targets[i], v.as_list()[i]);
}

}  // namespace

Interpreter::Flow Interpreter::exec_for(const Stmt& s, std::string& out) {
  List items = iterate(eval(*s.expr), s.line);
  auto loop_scope = std::make_shared<Scope>();
  loop_scope->parent = scope_;
  const auto saved = scope_;
  scope_ = loop_scope;
  if (s.cond) {  // the "if" of a for filters before the loop counts
    List kept;
    for (Value& item : items) {
      charge(1, s.line);
      unpack_into(loop_scope->vars, s.targets, item, s.line);
      if (eval(*s.cond).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const size_t n = items.size();
  // The loop object is rebuilt from a prototype each iteration (its fields by position); cycle()
  // reads the current iteration through a shared counter.
  auto current = std::make_shared<size_t>(0);
  Dict proto;
  for (const char* key : {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                          "depth", "depth0", "previtem", "nextitem"})
    proto.entries.emplace_back(Value(key), Value());
  proto.entries[6].second = Value(n);
  proto.entries[7].second = Value(1);
  proto.entries[8].second = Value(0);
  proto.set("cycle", Value(Callable{"loop.cycle", [current](const CallArgs& a, Interpreter&) {
                                      if (a.positional.empty()) return Value::undefined("");
                                      return a.positional[*current % a.positional.size()];
                                    }}));
  for (size_t i = 0; i < n; ++i) {
    charge(1, s.line);
    unpack_into(loop_scope->vars, s.targets, items[i], s.line);
    *current = i;
    Dict loop = proto;
    auto& f = loop.entries;
    f[0].second = Value(i + 1);
    f[1].second = Value(i);
    f[2].second = Value(n - i);
    f[3].second = Value(n - i - 1);
    f[4].second = Value(i == 0);
    f[5].second = Value(i + 1 == n);
    f[9].second = i > 0 ? items[i - 1] : Value::undefined("there is no previous item");
    f[10].second = i + 1 < n ? items[i + 1] : Value::undefined("there is no next item");
    loop_scope->vars.set("loop", Value(std::move(loop)));
    if (exec(s.bodies[0], out) == Flow::Break) break;
  }
  if (n == 0) exec(s.bodies[1], out);
  scope_ = saved;
  return Flow::Normal;
}

void Interpreter::exec_set(const Stmt& s) {
  Value v = eval(*s.expr);
  if (!s.name.empty()) {
    const Value target = lookup(s.targets[0]);
    if (!target.is_namespace())
      render_error(s.line, "cannot assign attribute '" + s.name + "' on " + target.type_name() +
                               " (only a namespace() takes attributes)");
    target.as_namespace().attrs.set(s.name, std::move(v));
    return;
  }
  unpack_into(scope_->vars, s.targets, v, s.line);
}

Value Interpreter::define_macro(const Stmt& s) {
  // The macro sees the scope it is defined in; held weakly, since that scope holds the macro.
  std::weak_ptr<Scope> defining = scope_;
  const Stmt* def = &s;
  return Value(Callable{s.name, [def, defining](const CallArgs& args, Interpreter& in) {
                          const auto parent = defining.lock();
                          if (!parent)
                            render_error(def->line,
                                         "macro '" + def->name + "' called after its scope ended");
                          return in.call_macro(*def, parent, args);
                        }});
}

Value Interpreter::call_macro(const Stmt& def, const std::shared_ptr<Scope>& parent,
                              const CallArgs& args) {
  auto frame = std::make_shared<Scope>();
  frame->parent = parent;
  List varargs;
  for (size_t i = def.params.size(); i < args.positional.size(); ++i)
    varargs.push_back(args.positional[i]);
  Dict kwargs;
  for (const auto& named : args.named) {
    const bool param = std::any_of(def.params.begin(), def.params.end(),
                                   [&](const MacroParam& p) { return p.name == named.first; });
    if (!param) kwargs.set(named.first, named.second);
  }
  const auto saved = scope_;
  scope_ = frame;
  // An error ends the whole render, so the scope needs restoring only on success.
  for (size_t i = 0; i < def.params.size(); ++i) {
    const MacroParam& p = def.params[i];
    if (const Value* v = args.get(i, p.name))
      frame->vars.set(p.name, *v);
    else if (p.default_value)
      frame->vars.set(p.name, eval(*p.default_value));
    else
      frame->vars.set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
  }
  frame->vars.set("varargs", Value(std::move(varargs)));
  frame->vars.set("kwargs", Value(std::move(kwargs)));
  std::string out;
  exec(def.bodies[0], out);
  scope_ = saved;
  return Value(std::move(out));
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value v) {
  for (const auto& f : filters) v = eval_filter(*f, std::move(v));
  return v;
}

// ---- expressions ----

Value Interpreter::call(const Value& callee, const CallArgs& args, int line) {
  if (callee.is_undefined()) undefined_error(callee, line);
  if (!callee.is_callable()) render_error(line, "'" + callee.type_name() + "' is not callable");
  DepthGuard guard(*this, line);
  charge(1, line);
  return callee.as_callable().call(args, *this);
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
  for (const auto& [k, v] : e.kwargs) args.named.emplace_back(k, eval(*v));
  return args;
}

Value Interpreter::eval_filter(const Expr& e, Value target) {
  return apply_filter(e.name, target, eval_args(e, 1), *this, e.line);
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1]);
    if (!compare_op(e.ops[i], left, right, e.line)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval(const Expr& e) {
  DepthGuard guard(*this, e.line);
  switch (e.type) {
    case ExprType::Literal:
      return e.value;
    case ExprType::Name:
      return lookup(e.name);
    case ExprType::List: {
      List items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return e.name == "tuple" ? Value::tuple(std::move(items)) : Value(std::move(items));
    }
    case ExprType::Dict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i]);
        if (!k.is_none() && !k.is_number() && !k.is_string())
          render_error(e.line, "unhashable dict key: " + k.type_name());
        d.set(std::move(k), eval(*e.args[i + 1]));
      }
      return Value(std::move(d));
    }
    case ExprType::Attr:
      return get_attr(eval(*e.args[0]), e.name, e.line);
    case ExprType::Item:
      return get_item(eval(*e.args[0]), eval(*e.args[1]), e.line);
    case ExprType::Slice: {
      const Value target = eval(*e.args[0]);
      Value parts[3];
      for (int i = 0; i < 3; ++i) parts[i] = e.args[i + 1] ? eval(*e.args[i + 1]) : Value(None{});
      return get_slice(target, parts[0], parts[1], parts[2], e.line);
    }
    case ExprType::Call:
      return call(eval(*e.args[0]), eval_args(e, 1), e.line);
    case ExprType::Filter:
      return eval_filter(e, eval(*e.args[0]));
    case ExprType::Test: {
      const bool r = apply_test(e.name, eval(*e.args[0]), eval_args(e, 1), *this, e.line);
      return Value(r != e.negated);
    }
    case ExprType::Not:
      return Value(!eval(*e.args[0]).truthy());
    case ExprType::Neg:
    case ExprType::Pos: {
      const Value v = eval(*e.args[0]);
      if (v.is_undefined()) undefined_error(v, e.line);
      if (!v.is_number())
        render_error(e.line, "bad operand type for unary " +
                                 std::string(e.type == ExprType::Neg ? "-" : "+") + ": '" +
                                 v.type_name() + "'");
      if (e.type == ExprType::Pos) return v.is_bool() ? Value(int64_t{v.as_bool()}) : v;
      if (v.is_float()) return Value(-v.as_double());
      const int64_t i = v.is_int() ? v.as_int() : v.as_bool();
      if (i == INT64_MIN) render_error(e.line, "integer overflow");
      return Value(-i);
    }
    case ExprType::Binary: {
      if (e.name == "and") {
        Value l = eval(*e.args[0]);
        return l.truthy() ? eval(*e.args[1]) : l;
      }
      if (e.name == "or") {
        Value l = eval(*e.args[0]);
        return l.truthy() ? l : eval(*e.args[1]);
      }
      return binary_op(e.name, eval(*e.args[0]), eval(*e.args[1]), *this, e.line);
    }
    case ExprType::Compare:
      return eval_compare(e);
    case ExprType::Condition:
      if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if expression evaluated to false and has no else");
  }
  return Value();
}

}  // namespace ts::jinja
