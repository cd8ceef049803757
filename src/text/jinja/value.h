// The values a Jinja template computes with, modelled on the Python objects jinja2 sees when
// transformers renders a chat template: None, bool, int, float, str, list, dict (insertion
// ordered, string keys), namespace, callables, and jinja2's Undefined (which prints as nothing but
// fails when its attributes are read). Lists, dicts and callables are shared, as Python objects
// are; only a namespace is ever changed after it is made.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ts::jinja {

class Value;
class Interpreter;

constexpr int kMaxNesting = 200;

using List = std::vector<Value>;

// Keys are None, bool, number or str values, compared as Python compares them (1 == 1.0 == True).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const Value* find(const std::string& key) const { return find(std::string_view(key)); }
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  void set(Value key, Value v);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;

  // The argument at `index` or named `name`, else nullptr.
  const Value* get(size_t index, std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<Value(const CallArgs&, Interpreter&)> call;
};

// Why a value is undefined ("'tools' is undefined"): the message of the error that using it for
// more than printing or testing raises, as jinja2 words it.
struct Undefined {
  std::string hint;
};
struct None {};
struct Namespace {
  Dict attrs;
};

class Value {
 public:
  Value() : v_(Undefined{}) {}
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(size_t i) : v_(static_cast<int64_t>(i)) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  // A list or dict nested deeper than kMaxNesting is an error (ts::Error), so that printing,
  // comparing or dumping a value never recurses without bound.
  Value(List l);
  Value(Dict d);
  Value(std::shared_ptr<Namespace> n) : v_(std::move(n)) {}
  Value(Callable c) : v_(std::make_shared<const Callable>(std::move(c))) {}
  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  // jinja2's Markup (what |safe and |escape return): a str whose `+` HTML-escapes the plain str
  // added to it.
  static Value markup(std::string s);
  // What map, select and their kin return in jinja2: a Python generator, which iterates like a
  // list but has no length, cannot be indexed or written as JSON, and is always true.
  static Value generator(List l);
  // A Python tuple: a list that prints as (a, b).
  static Value tuple(List l);
  bool is_markup() const { return flavor_ == Flavor::Markup; }
  bool is_generator() const { return flavor_ == Flavor::Generator; }

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  // Python's numbers.Number: bool is one.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<const List>>(v_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<const Dict>>(v_); }
  bool is_namespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(v_); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<const Callable>>(v_); }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  // An int, float or bool as a double.
  double as_double() const;
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // Python's bool(x); Undefined is false.
  bool truthy() const;
  // Python's str(x) (Undefined: ""), as {{ x }} prints it.
  std::string str() const;
  // Python's repr(x), as str() of a list or dict writes its items.
  std::string repr() const;
  // jinja2's name of the type in messages: "str object", "dict object", "None", ...
  std::string type_name() const;

  // Python's ==: 1 == 1.0 == True, lists and dicts by content, Undefined equals Undefined.
  friend bool operator==(const Value& a, const Value& b);

 private:
  explicit Value(Undefined u) : v_(std::move(u)) {}
  enum class Flavor : uint8_t { Plain, Markup, Generator, Tuple };
  int depth_ = 0;  // how deep lists and dicts nest in this value
  Flavor flavor_ = Flavor::Plain;
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, std::shared_ptr<Namespace>,
               std::shared_ptr<const Callable>>
      v_;
};

// Python's float repr: the shortest text that reads back as `d` ("1.0", "1e-05", "1e+16").
std::string python_float(double d);

}  // namespace ts::jinja
