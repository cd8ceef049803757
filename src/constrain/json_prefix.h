// An incremental recognizer of one JSON object (RFC 8259, strict: UTF-8 checked, surrogate
// escapes paired), fed a byte at a time, for constrained generation. Its invariant is what makes
// the constraint safe: every prefix it accepts can still be completed to a valid object, so a
// generation it steers never reaches a dead end. It refuses a byte as early as that byte makes
// completion impossible (a lone low surrogate at its second hex digit, a leading zero, ...).
// Limits keep a steered model from running away, and its numbers within a double's range (a
// strict parser refuses 1e400): nesting deeper than kMaxDepth, whitespace between tokens of more
// than one line break ('\n'; '\r' is refused) or more other bytes than whitespace_limit (a
// pretty-printer's indentation at that depth, one more; a model steered into JSON otherwise pads
// with long runs of spaces until its token budget is gone), more than
// kMaxDigits digits before or after a number's point and more than kMaxExponentDigits in its
// exponent (so below 1e200) are refused. The state is a few bytes, copied freely.
#pragma once

#include <cstdint>
#include <string_view>

#include "constrain/byte_recognizer.h"

namespace ts {

class JsonPrefix : public ByteRecognizer<JsonPrefix> {
 public:
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxWhitespace = 128;
  static constexpr int kIndentPerLevel = 4;
  // Whitespace bytes other than '\n' one run between tokens may hold, `depth` containers deep.
  static constexpr int whitespace_limit(int depth) {
    return kIndentPerLevel * depth + 1 < kMaxWhitespace ? kIndentPerLevel * depth + 1
                                                        : kMaxWhitespace;
  }
  static constexpr int kMaxDigits = 100;
  static constexpr int kMaxExponentDigits = 2;

  // Whether `c` can follow the bytes fed so far; the state changes only when it can.
  bool feed(uint8_t c);
  // A whole object has been read: no byte can follow.
  bool complete() const { return state_ == State::Done; }
  // Inside a string, between characters: any byte that is not '"', '\\' or a control character,
  // in complete UTF-8 characters, continues it.
  bool in_plain_string() const { return state_ == State::String; }

  // Where the reader is, for a layer that adds its own rules (SchemaPrefix).
  enum class State : uint8_t {
    Start,       // before the object's '{'
    ObjectOpen,  // after '{': a key or '}'
    Key,         // after ',' in an object: a key
    Colon,       // after a key
    Value,       // after ':' or ',' in an array
    ArrayOpen,   // after '[': a value or ']'
    After,       // after a value in a container: ',' or its closing bracket
    Done,
    String,
    Escape,    // after '\'
    Hex,       // the 4 digits of \u (aux_: digits left)
    LowSlash,  // after a high surrogate's \uXXXX: its pair's '\'
    LowU,      // ... then 'u'
    Utf8,      // continuation bytes of a character (aux_: bytes left)
    Minus,     // number states
    Zero,
    Int,
    Point,
    Frac,
    Exp,
    ExpSign,
    ExpInt,
    Literal,  // true / false / null (literal_, aux_: bytes read)
  };
  State state() const { return state_; }
  int depth() const { return depth_; }
  bool in_number() const { return state_ >= State::Minus && state_ <= State::ExpInt; }
  // A value has just ended (in a container, or the whole object).
  bool after_value() const { return state_ == State::After || state_ == State::Done; }
  // Ends a number that is complete here, as the byte after it would; false if it is not complete.
  bool end_number();

 private:
  bool value_start(uint8_t c);
  bool structural(uint8_t c);
  bool string_byte(uint8_t c);
  bool hex_digit(uint8_t c);
  bool number_byte(uint8_t c);
  bool push(bool object);
  void end_value();
  bool top_is_object() const { return (stack_ >> (depth_ - 1)) & 1; }

  State state_ = State::Start;
  bool key_ = false;       // the string being read is a key
  bool low_half_ = false;  // the \u digits being read must be a low surrogate
  uint8_t depth_ = 0;      // open containers
  uint8_t aux_ = 0;  // \u digits or UTF-8 bytes left, literal bytes read, a number part's digits
  uint8_t utf8_lo_ = 0x80;  // range of the next continuation byte
  uint8_t utf8_hi_ = 0xBF;
  uint8_t literal_ = 0;      // 0 true, 1 false, 2 null
  uint16_t code_ = 0;        // the \u digits read so far, for the surrogate checks
  uint16_t whitespace_ = 0;  // whitespace bytes other than '\n' in a row
  bool line_break_ = false;  // ... one of them a '\n'
  uint64_t stack_ = 0;       // bit i: container i is an object (else an array)
};

}  // namespace ts
