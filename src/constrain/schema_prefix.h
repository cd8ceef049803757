// An incremental recognizer of one JSON object that satisfies a JsonSchema, fed a byte at a time.
// JsonPrefix reads the syntax; this layer adds the schema's rules on top of it, with the same
// invariant: every prefix it accepts can still be completed to a valid instance, so a generation
// it steers never reaches a dead end. It refuses a byte as soon as no valid completion is left:
// a key that is not declared or already written, '}' before the required keys, ',' when no key
// is left to write or an array is full, a value of the wrong type at its first byte, a string's
// character past maxLength, a byte outside every enum value, a container the depth left cannot
// finish (the schema's shortest depths). The state is a few hundred bytes, copied freely.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/byte_recognizer.h"
#include "constrain/json_prefix.h"
#include "constrain/json_schema.h"

namespace ts {

// Narrows [lo, hi) of the sorted `texts` to those with byte c at `offset` (a run, the one that
// ends there first); false when none has.
bool narrow_sorted(const std::vector<std::string>& texts, uint32_t offset, uint8_t c, uint32_t& lo,
                   uint32_t& hi);

class SchemaPrefix : public ByteRecognizer<SchemaPrefix> {
 public:
  SchemaPrefix() = default;  // refuses everything; assign a constructed one
  explicit SchemaPrefix(const JsonSchema* schema) : schema_(schema) {}

  // The same contract as JsonPrefix's.
  bool feed(uint8_t c);
  bool complete() const { return syntax_.complete(); }
  // Inside a string, between characters, where any plain piece (no '"', '\\', control byte or
  // partial UTF-8) of at most this many characters continues it; 0 elsewhere.
  uint32_t plain_string_room() const;

 private:
  // One open container of the schema's own (values under an Any node have none).
  struct Frame {
    uint64_t written = 0;  // object: bit i when key i has been written; array: items begun
    uint16_t node = 0;
    uint16_t pending = 0;  // object: the node of the value after the key just read
  };
  enum class Mode : uint8_t {
    Structure,  // between tokens in a schema container (or before the root)
    Key,        // in a key: declared keys [lo_, hi_) match its bytes so far (free keys: none)
    String,     // in a String node's value, count_ characters read
    Number,     // in an Integer or Number node's value
    Match,      // in a Choices node's value: choices [lo_, hi_) match its bytes so far
    Any,        // in a value held to the syntax only (Any, true / false / null)
  };

  const SchemaNode& node(uint16_t id) const { return schema_->node(id); }
  bool fits(uint16_t id) const;
  bool number_open() const;
  bool end_number_then(uint8_t c);
  bool structure_byte(uint8_t c);
  bool open_value(uint16_t id, uint8_t c, const JsonPrefix& next);
  bool start_key(const JsonPrefix& next);
  bool comma(const JsonPrefix& next);
  bool close(const JsonPrefix& next);
  bool key_byte(uint8_t c);
  bool string_byte(uint8_t c);
  bool number_byte(uint8_t c);
  bool match_byte(uint8_t c);
  bool any_byte(uint8_t c);
  bool key_left(const Frame& f, uint32_t lo, uint32_t hi) const;
  bool value_ended(const JsonPrefix& next) const {
    return next.after_value() && next.depth() == value_depth_;
  }

  const JsonSchema* schema_ = nullptr;
  JsonPrefix syntax_;
  Mode mode_ = Mode::Structure;
  uint8_t depth_ = 0;        // open frames
  uint8_t value_depth_ = 0;  // the syntax depth around the value being read
  uint16_t value_node_ = 0;  // String / Number / Match: the value's node
  uint32_t lo_ = 0, hi_ = 0, offset_ = 0;
  uint32_t count_ = 0;      // String: characters; Integer: digits
  uint64_t magnitude_ = 0;  // Integer: the digits' value
  bool negative_ = false;   // Integer: a '-' came first
  std::array<Frame, JsonSchema::kMaxDepth> frames_{};
};

}  // namespace ts
