// A JSON Schema (OpenAI's structured outputs) compiled into the node table SchemaPrefix walks.
// What is implemented is what a steered model can be held to byte by byte, refusing a byte as soon
// as no valid completion is left:
//   type (one or a list), properties, required, additionalProperties, items, minItems, maxItems,
//   minLength, maxLength, minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers
//   (which are always held to int64), enum, const, anyOf / oneOf whose branches start with
//   different bytes
//   (a string or null, an object or an array, ...), allOf of one schema, $ref into $defs /
//   definitions (recursion included), nullable.
// Annotations (title, description, default, examples, format, $schema, ...) are ignored, as the
// specification reads them. A validation keyword outside that list (pattern, multipleOf, ...) is an
// Input error naming it and where it is, never ignored: the answer would not be what was asked.
// An object with declared properties is written with only those properties (an instance that
// additionalProperties allows, whatever it says); keys and enum values are written exactly as
// their compact JSON text.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace ts {

struct SchemaNode {
  enum class Kind : uint8_t {
    Any,      // any JSON value
    Object,   // keys and key_nodes, or free keys with `additional` values
    Array,    // items
    String,   // min_length..max_length characters
    Integer,  // a number without fraction or exponent
    Number,
    Boolean,
    Null,
    Choices,  // one of `choices`, byte for byte (enum, const)
    Union,    // a node per first byte (anyOf, oneOf, a list of types)
  };
  // The byte classes a value starts with, for Union.
  enum FirstByte : uint8_t { kObject, kArray, kString, kNumber, kTrue, kFalse, kNull, kClasses };
  static constexpr uint32_t kUnbounded = UINT32_MAX;
  static constexpr uint16_t kNoNode = UINT16_MAX;

  Kind kind = Kind::Any;
  std::vector<std::string> keys;  // Object: each key's JSON text with its quotes, sorted
  std::vector<uint16_t> key_nodes;
  uint64_t required = 0;          // bit i: keys[i] must be written
  uint16_t additional = kNoNode;  // Object without keys: the value node of any key
  uint16_t items = 0;             // Array
  uint32_t min_count = 0;         // Array: items; String: characters
  uint32_t max_count = kUnbounded;
  int64_t min_value = INT64_MIN;  // Integer: the values allowed (always within int64)
  int64_t max_value = INT64_MAX;
  std::vector<std::string> choices;         // Choices: compact JSON texts, sorted
  std::array<uint16_t, kClasses> branch{};  // Union: the node for each first byte, or kNoNode
  // Open containers a shortest valid value needs (kUnsatisfiable when none exists).
  uint32_t min_depth = 0;
  static constexpr uint32_t kUnsatisfiable = UINT32_MAX;
};

// The class of a value's first byte; kClasses for a byte no value starts with.
SchemaNode::FirstByte first_byte_class(uint8_t c);

class JsonSchema {
 public:
  // Containers of the schema's own nested deeper than this are refused while generating (values
  // under an Any node count against JsonPrefix::kMaxDepth only).
  static constexpr uint32_t kMaxDepth = 16;
  static constexpr size_t kMaxKeys = 64;  // properties of one object

  // An Input error naming the keyword and its place ("#/properties/name") for what is not
  // implemented, malformed, unsatisfiable, or not rooted in an object.
  static JsonSchema compile(const nlohmann::json& schema);
  // Any JSON object: JSON mode. One instance, shared.
  static const std::shared_ptr<const JsonSchema>& any_object();

  const SchemaNode& node(uint16_t id) const { return nodes_[id]; }
  uint16_t root() const { return 0; }

 private:
  friend class SchemaCompiler;
  std::vector<SchemaNode> nodes_;
};

}  // namespace ts
