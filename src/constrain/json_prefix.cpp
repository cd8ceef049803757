#include "constrain/json_prefix.h"

namespace ts {
namespace {

bool is_whitespace(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}

int hex_value(uint8_t c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr std::string_view kLiterals[3] = {"true", "false", "null"};

}  // namespace

bool JsonPrefix::end_number() {
  if (state_ != State::Zero && state_ != State::Int && state_ != State::Frac &&
      state_ != State::ExpInt)
    return false;
  end_value();
  return true;
}

bool JsonPrefix::feed(uint8_t c) {
  switch (state_) {
    case State::Start:
    case State::ObjectOpen:
    case State::Key:
    case State::Colon:
    case State::Value:
    case State::ArrayOpen:
    case State::After:
      if (is_whitespace(c)) {
        if (c == '\n') {
          if (line_break_) return false;
          line_break_ = true;
          return true;
        }
        if (c == '\r' || whitespace_ >= whitespace_limit(depth_)) return false;
        ++whitespace_;
        return true;
      }
      if (!structural(c)) return false;
      whitespace_ = 0;
      line_break_ = false;
      return true;
    case State::Done:
      return false;
    case State::String:
    case State::Utf8:
      return string_byte(c);
    case State::Escape:
      if (c == 'u') {
        state_ = State::Hex, aux_ = 4, code_ = 0;
        return true;
      }
      if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' &&
          c != 't')
        return false;
      state_ = State::String;
      return true;
    case State::Hex:
      return hex_digit(c);
    case State::LowSlash:
      if (c != '\\') return false;
      state_ = State::LowU;
      return true;
    case State::LowU:
      if (c != 'u') return false;
      state_ = State::Hex, aux_ = 4, code_ = 0, low_half_ = true;
      return true;
    case State::Literal: {
      const std::string_view lit = kLiterals[literal_];
      if (c != static_cast<uint8_t>(lit[aux_])) return false;
      if (++aux_ == lit.size()) end_value();
      return true;
    }
    default:
      return number_byte(c);
  }
}

// A non-whitespace byte between tokens.
bool JsonPrefix::structural(uint8_t c) {
  switch (state_) {
    case State::Start:
      return c == '{' && push(true);
    case State::ObjectOpen:
      if (c == '}') {
        --depth_;
        end_value();
        return true;
      }
      [[fallthrough]];
    case State::Key:
      if (c != '"') return false;
      state_ = State::String, key_ = true;
      return true;
    case State::Colon:
      if (c != ':') return false;
      state_ = State::Value;
      return true;
    case State::ArrayOpen:
      if (c == ']') {
        --depth_;
        end_value();
        return true;
      }
      return value_start(c);
    case State::Value:
      return value_start(c);
    case State::After:
      if (c == ',') {
        state_ = top_is_object() ? State::Key : State::Value;
        return true;
      }
      if (c != (top_is_object() ? '}' : ']')) return false;
      --depth_;
      end_value();
      return true;
    default:
      return false;
  }
}

bool JsonPrefix::value_start(uint8_t c) {
  switch (c) {
    case '{':
      return push(true);
    case '[':
      return push(false);
    case '"':
      state_ = State::String, key_ = false;
      return true;
    case '-':
      state_ = State::Minus;
      return true;
    case '0':
      state_ = State::Zero;
      return true;
    case 't':
    case 'f':
    case 'n':
      state_ = State::Literal, literal_ = c == 't' ? 0 : c == 'f' ? 1 : 2, aux_ = 1;
      return true;
    default:
      if (c < '1' || c > '9') return false;
      state_ = State::Int, aux_ = 1;
      return true;
  }
}

bool JsonPrefix::push(bool object) {
  if (depth_ >= kMaxDepth) return false;
  const uint64_t bit = uint64_t{1} << depth_;
  stack_ = object ? stack_ | bit : stack_ & ~bit;
  ++depth_;
  state_ = object ? State::ObjectOpen : State::ArrayOpen;
  return true;
}

void JsonPrefix::end_value() {
  state_ = depth_ == 0 ? State::Done : State::After;
}

// Inside a string: a character's bytes (UTF-8 checked as the decoder does: no overlong forms,
// surrogates or code points past U+10FFFF), an escape, or the closing quote.
bool JsonPrefix::string_byte(uint8_t c) {
  if (state_ == State::Utf8) {
    if (c < utf8_lo_ || c > utf8_hi_) return false;
    utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
    if (--aux_ == 0) state_ = State::String;
    return true;
  }
  if (c == '"') {
    if (key_) {
      state_ = State::Colon;
    } else {
      end_value();
    }
    return true;
  }
  if (c == '\\') {
    state_ = State::Escape;
    return true;
  }
  if (c < 0x20) return false;
  if (c < 0x80) return true;
  if (c >= 0xC2 && c <= 0xDF) {
    aux_ = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    aux_ = 2;
    if (c == 0xE0) utf8_lo_ = 0xA0;
    if (c == 0xED) utf8_hi_ = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    aux_ = 3;
    if (c == 0xF0) utf8_lo_ = 0x90;
    if (c == 0xF4) utf8_hi_ = 0x8F;
  } else {
    return false;
  }
  state_ = State::Utf8;
  return true;
}

// A digit of \uXXXX. The second digit already tells a lone low surrogate (DC..DF) from a high
// one (D8..DB), which must be followed by \u and a low one.
bool JsonPrefix::hex_digit(uint8_t c) {
  const int v = hex_value(c);
  if (v < 0) return false;
  const uint16_t code = static_cast<uint16_t>(code_ << 4 | v);
  const int read = 5 - aux_;  // digits read, this one included
  if (low_half_ && read == 1 && v != 0xD) return false;
  if (read == 2) {
    const bool low = code >= 0xDC && code <= 0xDF;
    if (low != low_half_) return false;
  }
  code_ = code;
  if (--aux_ > 0) return true;
  const bool high = !low_half_ && code_ >= 0xD800 && code_ <= 0xDBFF;
  low_half_ = false;
  state_ = high ? State::LowSlash : State::String;
  return true;
}

// A number's next byte; a byte that cannot continue a complete number ends it and is read as
// what follows the value.
bool JsonPrefix::number_byte(uint8_t c) {
  const bool digit = is_digit(c);
  switch (state_) {
    case State::Minus:
      if (!digit) return false;
      state_ = c == '0' ? State::Zero : State::Int, aux_ = 1;
      return true;
    case State::Zero:
    case State::Int:
      if (digit && state_ == State::Int) return aux_ < kMaxDigits && ++aux_;
      if (c == '.') {
        state_ = State::Point;
        return true;
      }
      if (c == 'e' || c == 'E') {
        state_ = State::Exp;
        return true;
      }
      break;
    case State::Point:
      if (!digit) return false;
      state_ = State::Frac, aux_ = 1;
      return true;
    case State::Frac:
      if (digit) return aux_ < kMaxDigits && ++aux_;
      if (c == 'e' || c == 'E') {
        state_ = State::Exp;
        return true;
      }
      break;
    case State::Exp:
      if (c == '+' || c == '-') {
        state_ = State::ExpSign;
        return true;
      }
      [[fallthrough]];
    case State::ExpSign:
      if (!digit) return false;
      state_ = State::ExpInt, aux_ = 1;
      return true;
    case State::ExpInt:
      if (digit) return aux_ < kMaxExponentDigits && ++aux_;
      break;
    default:
      return false;
  }
  // A complete number (0, an integer, a fraction, an exponent) followed by something else.
  if (digit) return false;  // a digit after a leading 0
  const JsonPrefix before = *this;
  end_value();
  if (feed(c)) return true;
  *this = before;
  return false;
}

}  // namespace ts
