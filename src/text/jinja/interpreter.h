// Renders a parsed template: runs its statements against scopes of variables and evaluates its
// expressions with jinja2's semantics. Every render is bounded (RenderLimits): a template is file
// content, so a hostile one must end with an error, never hang, exhaust memory or the stack.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace ts::jinja {

struct RenderLimits {
  size_t max_output = size_t{16} << 20;  // bytes of output, and of any one string or list built
  int max_depth = 256;                   // nested expressions, statements and macro calls
  uint64_t max_steps = 20'000'000;       // loop iterations, calls, and bytes built / 1024
};

struct Scope {
  Dict vars;
  std::shared_ptr<Scope> parent;
};

class Interpreter {
 public:
  Interpreter(const RenderLimits& limits, std::time_t now, std::shared_ptr<Scope> globals);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string render(const Body& body);

  Value call(const Value& callee, const CallArgs& args, int line);
  // Counts work against max_steps; an error past it.
  void charge(uint64_t steps, int line);
  // An error when a string or list of `size` would pass max_output.
  void check_size(size_t size, int line) const;
  std::time_t now() const { return now_; }
  // Namespaces are tracked so that the cycles a template can make through them are broken when
  // the render ends.
  Value make_namespace(Dict attrs);

 private:
  enum class Flow { Normal, Break, Continue };
  struct DepthGuard;

  Flow exec(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void exec_set(const Stmt& s);
  Value define_macro(const Stmt& s);
  Value call_macro(const Stmt& def, const std::shared_ptr<Scope>& parent, const CallArgs& args);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v);
  void append(std::string& out, const std::string& text, int line);

  Value eval(const Expr& e);
  Value eval_filter(const Expr& e, Value target);
  Value eval_compare(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);

  RenderLimits limits_;
  std::time_t now_;
  std::shared_ptr<Scope> scope_;
  int depth_ = 0;
  uint64_t steps_ = 0;
  std::vector<std::weak_ptr<Namespace>> namespaces_;
};

}  // namespace ts::jinja
