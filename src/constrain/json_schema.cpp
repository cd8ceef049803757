#include "constrain/json_schema.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "constrain/json_prefix.h"
#include "core/error.h"

namespace ts {

using nlohmann::json;
using Kind = SchemaNode::Kind;

namespace {

// Validation keywords a model cannot be held to here: refused, never ignored.
constexpr std::string_view kRefused[] = {"pattern",
                                         "patternProperties",
                                         "propertyNames",
                                         "minProperties",
                                         "maxProperties",
                                         "multipleOf",
                                         "contains",
                                         "minContains",
                                         "maxContains",
                                         "prefixItems",
                                         "additionalItems",
                                         "not",
                                         "if",
                                         "then",
                                         "else",
                                         "dependentRequired",
                                         "dependentSchemas",
                                         "dependencies",
                                         "unevaluatedProperties",
                                         "unevaluatedItems",
                                         "$dynamicRef",
                                         "$recursiveRef"};

// Keywords that constrain a value of one type, and so cannot stand beside $ref, anyOf, enum...
constexpr std::string_view kTyped[] = {"type",
                                       "properties",
                                       "required",
                                       "additionalProperties",
                                       "items",
                                       "minItems",
                                       "maxItems",
                                       "minLength",
                                       "maxLength",
                                       "nullable",
                                       "minimum",
                                       "maximum",
                                       "exclusiveMinimum",
                                       "exclusiveMaximum"};

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  fail(ErrorKind::Input, "json_schema at " + where + ": " + what);
}

constexpr std::string_view kBounds[] = {"minimum", "maximum", "exclusiveMinimum",
                                        "exclusiveMaximum"};

// Narrows [lo, hi] by an integer bound: ceil of a minimum, floor of a maximum, one step in for the
// exclusive ones. Integer bounds are read exactly (a double rounds past 2^53). A bound past
// int64's range leaves the range whole or empties it.
void apply_integer_bound(const json& v, std::string_view key, const std::string& where, int64_t& lo,
                         int64_t& hi) {
  if (!v.is_number()) bad(where, std::string(key) + " must be a number");
  using Wide = __int128;
  const bool lower = key == "minimum" || key == "exclusiveMinimum";
  const bool exclusive = key.starts_with("exclusive");
  Wide n = 0;  // the bound, inclusive
  if (v.is_number_unsigned()) {
    n = static_cast<Wide>(v.get<uint64_t>()) + (exclusive ? (lower ? 1 : -1) : 0);
  } else if (v.is_number_integer()) {
    n = static_cast<Wide>(v.get<int64_t>()) + (exclusive ? (lower ? 1 : -1) : 0);
  } else {
    const double x = v.get<double>();
    const double b = std::clamp(lower ? std::ceil(x) : std::floor(x), -1e30, 1e30);
    n = static_cast<Wide>(b);  // exact: b is integral, and within __int128
    if (exclusive && b == x) n += lower ? 1 : -1;
  }
  if (lower ? n > INT64_MAX : n < INT64_MIN) {
    lo = INT64_MAX, hi = INT64_MIN;  // nothing is left
  } else if (lower) {
    lo = static_cast<int64_t>(std::max<Wide>(lo, n));
  } else {
    hi = static_cast<int64_t>(std::min<Wide>(hi, n));
  }
}

bool has_typed_keyword(const json& s) {
  return std::any_of(std::begin(kTyped), std::end(kTyped),
                     [&](std::string_view k) { return s.contains(k); });
}

// The compact text a model must write for `v`, checked against the limits every generated value
// is held to (a number like 1e300 could never be written).
std::string choice_text(const json& v, const std::string& where) {
  std::string text = v.dump();
  JsonPrefix p;
  if (!p.feed_all("{\"k\":" + text + "}") || !p.complete())
    bad(where, "the value " + text + " cannot be written within the JSON limits");
  return text;
}

bool type_matches(const json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  return type == "array" && v.is_array();
}

std::vector<std::string> type_list(const json& s, const std::string& where) {
  std::vector<std::string> types;
  if (const auto t = s.find("type"); t != s.end()) {
    if (t->is_string()) {
      types.push_back(t->get<std::string>());
    } else if (t->is_array() && !t->empty()) {
      for (const json& e : *t) {
        if (!e.is_string()) bad(where, "\"type\" must be a string or a list of strings");
        types.push_back(e.get<std::string>());
      }
    } else {
      bad(where, "\"type\" must be a string or a list of strings");
    }
    for (const std::string& type : types)
      if (type != "string" && type != "integer" && type != "number" && type != "boolean" &&
          type != "null" && type != "object" && type != "array")
        bad(where, "unknown type \"" + type + "\"");
  }
  if (const auto n = s.find("nullable"); n != s.end()) {
    if (!n->is_boolean()) bad(where, "\"nullable\" must be true or false");
    if (!types.empty() && n->get<bool>()) types.push_back("null");
  }
  return types;
}

uint32_t count(const json& s, const char* key, uint32_t def, const std::string& where) {
  const auto v = s.find(key);
  if (v == s.end()) return def;
  if (!v->is_number_unsigned() || v->get<uint64_t>() >= SchemaNode::kUnbounded)
    bad(where, std::string("\"") + key + "\" must be a non-negative integer");
  return static_cast<uint32_t>(v->get<uint64_t>());
}

uint32_t add_depth(uint32_t a, uint32_t b) {
  return a == SchemaNode::kUnsatisfiable || b == SchemaNode::kUnsatisfiable
             ? SchemaNode::kUnsatisfiable
             : a + b;
}

}  // namespace

SchemaNode::FirstByte first_byte_class(uint8_t c) {
  switch (c) {
    case '{':
      return SchemaNode::kObject;
    case '[':
      return SchemaNode::kArray;
    case '"':
      return SchemaNode::kString;
    case 't':
      return SchemaNode::kTrue;
    case 'f':
      return SchemaNode::kFalse;
    case 'n':
      return SchemaNode::kNull;
    default:
      return c == '-' || (c >= '0' && c <= '9') ? SchemaNode::kNumber : SchemaNode::kClasses;
  }
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {}

  JsonSchema run() {
    if (!root_.is_object()) bad("#", "the schema must be an object");
    fill(reserve_ref("#"), root_, "#");
    resolve();
    const SchemaNode& root = out_.nodes_[0];
    if (root.kind != Kind::Object)
      bad("#", "the root must be an object (as OpenAI's structured outputs require)");
    if (root.min_depth == SchemaNode::kUnsatisfiable) bad("#", "no JSON value satisfies it");
    if (root.min_depth > JsonSchema::kMaxDepth)
      bad("#", "its shortest instance nests deeper than " + std::to_string(JsonSchema::kMaxDepth));
    return std::move(out_);
  }

 private:
  uint16_t add(SchemaNode n) {
    if (out_.nodes_.size() >= SchemaNode::kNoNode) bad("#", "too many nodes");
    out_.nodes_.push_back(std::move(n));
    return static_cast<uint16_t>(out_.nodes_.size() - 1);
  }

  uint16_t reserve_ref(const std::string& target) {
    const uint16_t id = add(SchemaNode{});
    refs_[target] = id;
    return id;
  }

  // Node `to` becomes a copy of node `from` (a $ref's target once it is compiled).
  void alias(uint16_t to, uint16_t from) {
    out_.nodes_[to] = out_.nodes_[from];
    if (const auto m = members_.find(from); m != members_.end()) members_[to] = m->second;
    if (exclusive_.contains(from)) exclusive_.insert(to);
  }

  uint16_t ref(const json& target, const std::string& where) {
    if (!target.is_string() || !target.get<std::string>().starts_with("#"))
      bad(where, "$ref must point into this schema (\"#/$defs/...\")");
    const std::string path = target.get<std::string>();
    if (const auto r = refs_.find(path); r != refs_.end()) return r->second;
    const json* resolved = nullptr;
    try {
      resolved = &root_.at(json::json_pointer(path.substr(1)));
    } catch (const json::exception&) {
      bad(where, "$ref \"" + path + "\" does not resolve");
    }
    const uint16_t id = reserve_ref(path);
    fill(id, *resolved, path);
    return id;
  }

  // Compiles a $ref's target into its reserved node. A target that is itself only a $ref back
  // into the cycle would have no schema to copy.
  void fill(uint16_t id, const json& target, const std::string& where) {
    filling_.push_back(id);
    const uint16_t compiled = compile(target, where);
    if (std::find(filling_.begin(), filling_.end(), compiled) != filling_.end())
      bad(where, "a cycle of $refs with no schema in it");
    filling_.pop_back();
    alias(id, compiled);
  }

  // Schemas nested (and $refs followed) deeper than this are refused: the compiler recurses, and a
  // request body of nested "items" must not exhaust its stack.
  static constexpr int kMaxNesting = 128;

  uint16_t compile(const json& s, const std::string& where) {
    if (nesting_ >= kMaxNesting)
      bad(where, "the schema nests deeper than " + std::to_string(kMaxNesting) + " levels");
    ++nesting_;
    const uint16_t id = compile_schema(s, where);
    --nesting_;
    return id;
  }

  uint16_t compile_schema(const json& s, const std::string& where) {
    if (s.is_boolean()) return add(s.get<bool>() ? SchemaNode{} : unsatisfiable());
    if (!s.is_object()) bad(where, "a schema must be an object or a boolean");
    for (std::string_view k : kRefused)
      if (s.contains(k)) bad(where, "the keyword " + std::string(k) + " is not supported");
    if (const auto u = s.find("uniqueItems"); u != s.end() && *u != false)
      bad(where, "\"uniqueItems\" is not supported");
    if (const auto r = s.find("$ref"); r != s.end()) {
      if (has_typed_keyword(s) || s.contains("enum") || s.contains("const"))
        bad(where, "keywords beside $ref are not supported");
      return ref(*r, where);
    }
    if (const auto a = s.find("allOf"); a != s.end()) {
      if (!a->is_array() || a->size() != 1 || has_typed_keyword(s))
        bad(where, "allOf is supported only as a list of one schema");
      return compile((*a)[0], where + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (const auto a = s.find(key); a != s.end()) {
        if (!a->is_array() || a->empty()) bad(where, std::string(key) + " must be a list");
        if (has_typed_keyword(s)) bad(where, std::string("keywords beside ") + key);
        std::vector<uint16_t> members;
        for (size_t i = 0; i < a->size(); ++i)
          members.push_back(compile((*a)[i], where + "/" + key + "/" + std::to_string(i)));
        return union_of(std::move(members), key[0] == 'o');
      }
    const std::vector<std::string> types = type_list(s, where);
    if (s.contains("enum") || s.contains("const")) {
      // The values are written as they are: a keyword that would rule some out is not applied.
      for (std::string_view k : kTyped)
        if (k != "type" && k != "nullable" && s.contains(k))
          bad(where, "keywords beside enum / const (other than type) are not supported");
      return choices(s, types, where);
    }
    const bool bounded = std::any_of(std::begin(kBounds), std::end(kBounds),
                                     [&](std::string_view k) { return s.contains(k); });
    if (bounded && (std::find(types.begin(), types.end(), "integer") == types.end() ||
                    std::find(types.begin(), types.end(), "number") != types.end()))
      bad(where, "minimum / maximum are supported on integers only (\"type\": \"integer\")");
    if (types.empty()) return typed(s, inferred_type(s), where);
    if (types.size() == 1) return typed(s, types[0], where);
    std::vector<uint16_t> members;
    members.reserve(types.size());
    for (const std::string& t : types) members.push_back(typed(s, t, where));
    return union_of(std::move(members), false);
  }

  static SchemaNode unsatisfiable() {
    SchemaNode n;
    n.kind = Kind::Choices;  // of no value
    return n;
  }

  static std::string inferred_type(const json& s) {
    for (const char* k : {"properties", "required", "additionalProperties"})
      if (s.contains(k)) return "object";
    for (const char* k : {"items", "minItems", "maxItems"})
      if (s.contains(k)) return "array";
    for (const char* k : {"minLength", "maxLength"})
      if (s.contains(k)) return "string";
    return "";
  }

  // oneOf is `exclusive`: a value may match one branch only. Branches told apart by their first
  // byte never share a value; an integer does match both "integer" and "number", and anything
  // matches an unconstrained branch, so those are refused there.
  uint16_t union_of(std::vector<uint16_t> members, bool exclusive) {
    SchemaNode n;
    n.kind = Kind::Union;
    const uint16_t id = add(n);
    if (exclusive) exclusive_.insert(id);
    members_[id] = std::move(members);
    return id;
  }

  uint16_t choices(const json& s, const std::vector<std::string>& types, const std::string& where) {
    std::vector<json> values;  // both keywords hold: the enum's values equal to the const
    const auto c = s.find("const");
    if (const auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array()) bad(where, "\"enum\" must be a list");
      for (const json& v : *e)
        if (c == s.end() || v == *c) values.push_back(v);
    } else {
      values.push_back(*c);
    }
    SchemaNode n;
    n.kind = Kind::Choices;
    for (const json& v : values)
      if (types.empty() || std::any_of(types.begin(), types.end(),
                                       [&](const std::string& t) { return type_matches(v, t); }))
        n.choices.push_back(choice_text(v, where));
    std::sort(n.choices.begin(), n.choices.end());
    n.choices.erase(std::unique(n.choices.begin(), n.choices.end()), n.choices.end());
    return add(std::move(n));
  }

  uint16_t typed(const json& s, const std::string& type, const std::string& where) {
    SchemaNode n;
    if (type == "object") return object(s, where);
    if (type == "array") {
      n.kind = Kind::Array;
      n.min_count = count(s, "minItems", 0, where);
      n.max_count = count(s, "maxItems", SchemaNode::kUnbounded, where);
      const auto items = s.find("items");
      if (items != s.end() && items->is_array())
        bad(where, "\"items\" as a list (tuples) is not supported");
      n.items = items == s.end() ? add(SchemaNode{}) : compile(*items, where + "/items");
      return add(std::move(n));
    }
    if (type == "string") {
      n.kind = Kind::String;
      n.min_count = count(s, "minLength", 0, where);
      n.max_count = count(s, "maxLength", SchemaNode::kUnbounded, where);
    } else if (type == "integer") {
      n.kind = Kind::Integer;
      for (std::string_view k : kBounds)
        if (const auto v = s.find(k); v != s.end())
          apply_integer_bound(*v, k, where, n.min_value, n.max_value);
    } else if (type == "number") {
      n.kind = Kind::Number;
    } else if (type == "boolean") {
      n.kind = Kind::Boolean;
    } else if (type == "null") {
      n.kind = Kind::Null;
    }
    return add(std::move(n));
  }

  uint16_t object(const json& s, const std::string& where) {
    SchemaNode n;
    n.kind = Kind::Object;
    const auto props = s.find("properties");
    if (props != s.end() && !props->is_object()) bad(where, "\"properties\" must be an object");
    std::vector<std::string> required;
    if (const auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) bad(where, "\"required\" must be a list of names");
      for (const json& name : *r) {
        if (!name.is_string()) bad(where, "\"required\" must be a list of names");
        required.push_back(name.get<std::string>());
      }
    }
    const json additional = s.value("additionalProperties", json(true));
    std::map<std::string, uint16_t> declared;  // by key text
    if (props != s.end())
      for (const auto& [name, sub] : props->items())
        declared[json(name).dump()] = compile(sub, where + "/properties/" + name);
    for (const std::string& name : required) {
      const std::string key = json(name).dump();
      if (declared.contains(key)) continue;
      if (additional == false)
        bad(where, "required \"" + name + "\" is not allowed by additionalProperties");
      declared[key] = compile(additional, where + "/additionalProperties");
    }
    if (declared.size() > JsonSchema::kMaxKeys)
      bad(where, "more than " + std::to_string(JsonSchema::kMaxKeys) + " properties");
    std::set<std::string> required_keys;
    for (const std::string& name : required) required_keys.insert(json(name).dump());
    for (const auto& [key, node] : declared) {
      if (required_keys.contains(key)) n.required |= uint64_t{1} << n.keys.size();
      n.keys.push_back(key);
      n.key_nodes.push_back(node);
    }
    if (declared.empty() && additional != false)
      n.additional = compile(additional, where + "/additionalProperties");
    return add(std::move(n));
  }

  // After every $ref is filled: shortest depths, then each union's first bytes.
  void resolve() {
    std::vector<SchemaNode>& nodes = out_.nodes_;
    for (SchemaNode& n : nodes) n.min_depth = SchemaNode::kUnsatisfiable;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < nodes.size(); ++i) {
        const uint32_t d = shortest(static_cast<uint16_t>(i));
        if (d < nodes[i].min_depth) nodes[i].min_depth = d, changed = true;
      }
    }
    for (auto& [id, members] : members_) assign_branches(id, members);
  }

  uint32_t shortest(uint16_t id) const {
    const SchemaNode& n = out_.nodes_[id];
    constexpr uint32_t kNone = SchemaNode::kUnsatisfiable;
    switch (n.kind) {
      case Kind::Object: {
        uint32_t d = 0;
        for (size_t i = 0; i < n.keys.size(); ++i)
          if (n.required >> i & 1) d = std::max(d, out_.nodes_[n.key_nodes[i]].min_depth);
        return add_depth(1, d);
      }
      case Kind::Array:
        if (n.min_count > n.max_count) return kNone;
        return n.min_count == 0 ? 1 : add_depth(1, out_.nodes_[n.items].min_depth);
      case Kind::String:
        return n.min_count > n.max_count ? kNone : 0;
      case Kind::Integer:
        return n.min_value > n.max_value ? kNone : 0;
      case Kind::Choices:
        return n.choices.empty() ? kNone : 0;
      case Kind::Union: {
        uint32_t d = kNone;
        for (uint16_t m : members_.at(id)) d = std::min(d, out_.nodes_[m].min_depth);
        return d;
      }
      default:
        return 0;
    }
  }

  void assign_branches(uint16_t id, const std::vector<uint16_t>& members) {
    SchemaNode& u = out_.nodes_[id];
    u.branch.fill(SchemaNode::kNoNode);
    const bool exclusive = exclusive_.contains(id);
    const auto satisfiable = [&](uint16_t m) {
      return out_.nodes_[m].min_depth != SchemaNode::kUnsatisfiable;
    };
    for (uint16_t m : members) {
      std::vector<uint16_t> visiting;
      if (!satisfiable(m) || !allows_anything(m, visiting)) continue;
      if (exclusive && std::count_if(members.begin(), members.end(), satisfiable) > 1)
        bad("#", "a oneOf branch that allows any value beside others is not supported");
      u.kind = Kind::Any;  // anything at all, whatever the other branches say
      return;
    }
    for (uint16_t m : members) {
      const SchemaNode& n = out_.nodes_[m];
      if (!satisfiable(m)) continue;
      for (int c = 0; c < SchemaNode::kClasses; ++c) {
        std::vector<uint16_t> visiting;
        if (!starts_with(m, c, visiting)) continue;
        uint16_t& slot = u.branch[static_cast<size_t>(c)];
        const Kind held = slot == SchemaNode::kNoNode ? Kind::Any : out_.nodes_[slot].kind;
        // Of "integer" and "number" in an anyOf, the number is the wider; oneOf refuses the pair.
        const bool wider = !exclusive && held == Kind::Integer && n.kind == Kind::Number;
        const bool narrower = !exclusive && held == Kind::Number && n.kind == Kind::Integer;
        if (slot == SchemaNode::kNoNode || slot == m || wider)
          slot = m;
        else if (!narrower)
          bad("#", "anyOf / oneOf branches that start alike (two of one type) are not supported");
      }
    }
  }

  // Whether node `id` is an Any, or a union with one among its branches.
  bool allows_anything(uint16_t id, std::vector<uint16_t>& visiting) const {
    const SchemaNode& n = out_.nodes_[id];
    if (n.kind == Kind::Any) return true;
    if (n.kind != Kind::Union || n.min_depth == SchemaNode::kUnsatisfiable ||
        std::find(visiting.begin(), visiting.end(), id) != visiting.end())
      return false;
    visiting.push_back(id);
    return std::any_of(members_.at(id).begin(), members_.at(id).end(),
                       [&](uint16_t m) { return allows_anything(m, visiting); });
  }

  // Whether a value of node `id` can start with first-byte class `c`. A union reached again
  // through $refs (`visiting`) adds nothing new.
  bool starts_with(uint16_t id, int c, std::vector<uint16_t>& visiting) const {
    const SchemaNode& n = out_.nodes_[id];
    switch (n.kind) {
      case Kind::Object:
        return c == SchemaNode::kObject;
      case Kind::Array:
        return c == SchemaNode::kArray;
      case Kind::String:
        return c == SchemaNode::kString;
      case Kind::Integer:
      case Kind::Number:
        return c == SchemaNode::kNumber;
      case Kind::Boolean:
        return c == SchemaNode::kTrue || c == SchemaNode::kFalse;
      case Kind::Null:
        return c == SchemaNode::kNull;
      case Kind::Choices:
        return std::any_of(n.choices.begin(), n.choices.end(), [&](const std::string& t) {
          return first_byte_class(static_cast<uint8_t>(t[0])) == c;
        });
      case Kind::Union:
        if (std::find(visiting.begin(), visiting.end(), id) != visiting.end()) return false;
        visiting.push_back(id);
        return std::any_of(members_.at(id).begin(), members_.at(id).end(),
                           [&](uint16_t m) { return starts_with(m, c, visiting); });
      default:
        return true;
    }
  }

 private:
  const json& root_;
  JsonSchema out_;
  std::map<std::string, uint16_t> refs_;
  std::map<uint16_t, std::vector<uint16_t>> members_;  // unions' branches, resolved last
  std::set<uint16_t> exclusive_;                       // the unions that are oneOf
  std::vector<uint16_t> filling_;                      // $refs being compiled
  int nesting_ = 0;
};

JsonSchema JsonSchema::compile(const json& schema) {
  return SchemaCompiler(schema).run();
}

const std::shared_ptr<const JsonSchema>& JsonSchema::any_object() {
  static const std::shared_ptr<const JsonSchema> schema =
      std::make_shared<const JsonSchema>(compile(json{{"type", "object"}}));
  return schema;
}

}  // namespace ts
