#include "constrain/schema_prefix.h"

#include <algorithm>
#include <climits>
#include <optional>

namespace ts {
namespace {

using Kind = SchemaNode::Kind;
using State = JsonPrefix::State;

bool is_whitespace(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

struct IntegerSoFar {
  bool negative = false;
  uint64_t magnitude = 0;
  uint32_t digits = 0;
};

// Whether an integer written so far (a sign, `digits` digits of value `magnitude`) can still end
// inside [lo, hi]. With k more digits its magnitude is magnitude * 10^k + [0, 10^k), unless it is
// a lone 0 (no digit may follow a leading zero); after a lone '-' it is -0 or any negative.
bool integer_reachable(const IntegerSoFar& s, int64_t lo, int64_t hi) {
  const auto [negative, magnitude, digits] = s;
  using Wide = __int128;
  if (digits == 0) return lo <= 0;
  const bool grows = !(digits == 1 && magnitude == 0);
  // Past 2^63 no int64 is left to reach; the loop stops there, long before __int128 overflows.
  constexpr Wide kBeyond = Wide{1} << 63;
  for (Wide low = magnitude, span = 1; low <= kBeyond; low *= 10, span *= 10) {
    const Wide high = low + span - 1;
    const Wide from = negative ? -high : low, to = negative ? -low : high;
    if (to >= lo && from <= hi) return true;
    if (!grows) break;
  }
  return false;
}

// The integer after byte c (a leading '-' or a digit; no fraction or exponent), if a value inside
// [lo, hi] is still reachable from it.
std::optional<IntegerSoFar> next_integer(IntegerSoFar s, uint8_t c, const SchemaNode& n) {
  if (c == '-' && s.digits == 0 && !s.negative) {
    s.negative = true;
  } else if (c >= '0' && c <= '9') {
    const unsigned __int128 m = static_cast<unsigned __int128>(s.magnitude) * 10 + (c - '0');
    if (m > UINT64_MAX) return std::nullopt;
    s.magnitude = static_cast<uint64_t>(m);
    ++s.digits;
  } else {
    return std::nullopt;
  }
  if (!integer_reachable(s, n.min_value, n.max_value)) return std::nullopt;
  return s;
}

}  // namespace

uint32_t SchemaPrefix::plain_string_room() const {
  if (!syntax_.in_plain_string()) return 0;
  switch (mode_) {
    case Mode::Any:
      return SchemaNode::kUnbounded;
    case Mode::String:
      return node(value_node_).max_count - count_;  // kUnbounded stays out of reach
    case Mode::Key:
      return node(frames_[depth_ - 1].node).keys.empty() ? SchemaNode::kUnbounded : 0;
    default:
      return 0;
  }
}

// Each handler checks the byte against a copy of the syntax state and changes nothing unless it
// is accepted.
bool SchemaPrefix::feed(uint8_t c) {
  if (schema_ == nullptr) return false;
  if (number_open()) {
    JsonPrefix next = syntax_;
    if (!next.feed(c)) return false;
    if (!next.in_number()) return end_number_then(c);
    return number_byte(c);
  }
  switch (mode_) {
    case Mode::Structure:
      return structure_byte(c);
    case Mode::Key:
      return key_byte(c);
    case Mode::String:
      return string_byte(c);
    case Mode::Match:
      return match_byte(c);
    default:
      return any_byte(c);
  }
}

// Whether a value of node `id` begun now can be finished within the depth left.
bool SchemaPrefix::fits(uint16_t id) const {
  const uint32_t d = node(id).min_depth;
  return d != SchemaNode::kUnsatisfiable && depth_ + d <= JsonSchema::kMaxDepth;
}

// A number the value being read is (not one inside an Any container: the syntax ends those).
bool SchemaPrefix::number_open() const {
  return (mode_ == Mode::Number || mode_ == Mode::Match || mode_ == Mode::Any) &&
         syntax_.in_number() && syntax_.depth() == value_depth_;
}

// A byte that cannot continue the number ends it, if it is complete (and one of the choices);
// the byte is then read as what follows the value.
bool SchemaPrefix::end_number_then(uint8_t c) {
  if (mode_ == Mode::Match && node(value_node_).choices[lo_].size() != offset_) return false;
  if (mode_ == Mode::Number && node(value_node_).kind == Kind::Integer) {
    const SchemaNode& n = node(value_node_);
    const __int128 value = negative_ ? -static_cast<__int128>(magnitude_) : magnitude_;
    if (value < n.min_value || value > n.max_value) return false;
  }
  const SchemaPrefix before = *this;
  if (!syntax_.end_number()) return false;
  mode_ = Mode::Structure;
  if (structure_byte(c)) return true;
  *this = before;
  return false;
}

bool SchemaPrefix::structure_byte(uint8_t c) {
  JsonPrefix next = syntax_;
  if (!next.feed(c)) return false;
  if (is_whitespace(c)) {
    syntax_ = next;
    return true;
  }
  switch (syntax_.state()) {
    case State::Start:
      return open_value(schema_->root(), c, next);
    case State::ObjectOpen:
    case State::Key:
      return c == '}' ? close(next) : start_key(next);
    case State::Colon:
      syntax_ = next;
      return true;
    case State::Value:
    case State::ArrayOpen: {
      if (c == ']') return close(next);
      const Frame& f = frames_[depth_ - 1];
      const SchemaNode& container = node(f.node);
      if (container.kind == Kind::Object) return open_value(f.pending, c, next);
      if (f.written >= container.max_count) return false;
      return open_value(container.items, c, next);
    }
    default:
      return c == ',' ? comma(next) : close(next);
  }
}

bool SchemaPrefix::open_value(uint16_t id, uint8_t c, const JsonPrefix& next) {
  while (node(id).kind == Kind::Union) {
    const SchemaNode::FirstByte cls = first_byte_class(c);
    if (cls == SchemaNode::kClasses) return false;
    id = node(id).branch[cls];
    if (id == SchemaNode::kNoNode) return false;
  }
  if (!fits(id)) return false;
  const SchemaNode& n = node(id);
  const SchemaNode::FirstByte cls = first_byte_class(c);
  uint32_t lo = 0, hi = static_cast<uint32_t>(n.choices.size());
  std::optional<IntegerSoFar> integer;
  switch (n.kind) {
    case Kind::Object:
    case Kind::Array:
      if (cls != (n.kind == Kind::Object ? SchemaNode::kObject : SchemaNode::kArray)) return false;
      break;
    case Kind::String:
      if (cls != SchemaNode::kString) return false;
      break;
    case Kind::Integer:
      integer = next_integer({}, c, n);
      if (!integer) return false;
      break;
    case Kind::Number:
      if (cls != SchemaNode::kNumber) return false;
      break;
    case Kind::Boolean:
      if (cls != SchemaNode::kTrue && cls != SchemaNode::kFalse) return false;
      break;
    case Kind::Null:
      if (cls != SchemaNode::kNull) return false;
      break;
    case Kind::Choices:
      if (!narrow_sorted(n.choices, 0, c, lo, hi)) return false;
      break;
    default:
      break;
  }
  // Accepted: an array counts the item it begins.
  if (depth_ > 0 && node(frames_[depth_ - 1].node).kind == Kind::Array)
    ++frames_[depth_ - 1].written;
  value_depth_ = static_cast<uint8_t>(syntax_.depth());
  syntax_ = next;
  switch (n.kind) {
    case Kind::Object:
    case Kind::Array:
      frames_[depth_++] = Frame{0, id, 0};
      mode_ = Mode::Structure;
      break;
    case Kind::String:
      mode_ = Mode::String, value_node_ = id, count_ = 0;
      break;
    case Kind::Integer:
      negative_ = integer->negative, magnitude_ = integer->magnitude, count_ = integer->digits;
      mode_ = Mode::Number, value_node_ = id;
      break;
    case Kind::Number:
      mode_ = Mode::Number, value_node_ = id;
      break;
    case Kind::Choices:
      mode_ = Mode::Match, value_node_ = id, lo_ = lo, hi_ = hi, offset_ = 1;
      break;
    default:
      mode_ = Mode::Any;
      break;
  }
  return true;
}

// Whether a key among [lo, hi) of the frame's object is still unwritten and its value fits.
bool SchemaPrefix::key_left(const Frame& f, uint32_t lo, uint32_t hi) const {
  const SchemaNode& n = node(f.node);
  for (uint32_t i = lo; i < hi; ++i)
    if (!(f.written >> i & 1) && fits(n.key_nodes[i])) return true;
  return false;
}

bool SchemaPrefix::start_key(const JsonPrefix& next) {
  const Frame& f = frames_[depth_ - 1];
  const SchemaNode& n = node(f.node);
  if (n.keys.empty()) {
    if (n.additional == SchemaNode::kNoNode || !fits(n.additional)) return false;
  } else if (!key_left(f, 0, static_cast<uint32_t>(n.keys.size()))) {
    return false;
  }
  syntax_ = next;
  mode_ = Mode::Key, lo_ = 0, hi_ = static_cast<uint32_t>(n.keys.size()), offset_ = 1;
  return true;
}

bool SchemaPrefix::comma(const JsonPrefix& next) {
  const Frame& f = frames_[depth_ - 1];
  const SchemaNode& n = node(f.node);
  bool more = false;
  if (n.kind == Kind::Array)
    more = f.written < n.max_count && fits(n.items);
  else if (n.keys.empty())
    more = n.additional != SchemaNode::kNoNode && fits(n.additional);
  else
    more = key_left(f, 0, static_cast<uint32_t>(n.keys.size()));
  if (!more) return false;
  syntax_ = next;
  return true;
}

bool SchemaPrefix::close(const JsonPrefix& next) {
  const Frame& f = frames_[depth_ - 1];
  const SchemaNode& n = node(f.node);
  if (n.kind == Kind::Array ? f.written < n.min_count : (f.written & n.required) != n.required)
    return false;
  syntax_ = next;
  --depth_;
  mode_ = Mode::Structure;
  return true;
}

bool narrow_sorted(const std::vector<std::string>& texts, uint32_t offset, uint8_t c, uint32_t& lo,
                   uint32_t& hi) {
  const auto at = [&](uint32_t i) {
    const std::string& t = texts[i];
    return t.size() > offset ? static_cast<int>(static_cast<uint8_t>(t[offset])) : -1;
  };
  uint32_t a = lo;
  while (a < hi && at(a) < c) ++a;
  uint32_t b = a;
  while (b < hi && at(b) == c) ++b;
  if (a == b) return false;
  lo = a, hi = b;
  return true;
}

bool SchemaPrefix::key_byte(uint8_t c) {
  JsonPrefix next = syntax_;
  if (!next.feed(c)) return false;
  Frame& f = frames_[depth_ - 1];
  const SchemaNode& n = node(f.node);
  if (n.keys.empty()) {
    syntax_ = next;
    if (next.state() == State::Colon) f.pending = n.additional, mode_ = Mode::Structure;
    return true;
  }
  uint32_t lo = lo_, hi = hi_;
  if (!narrow_sorted(n.keys, offset_, c, lo, hi) || !key_left(f, lo, hi)) return false;
  syntax_ = next;
  lo_ = lo, hi_ = hi, ++offset_;
  if (next.state() == State::Colon) {  // the closing quote: keys[lo_] is the key, whole
    f.written |= uint64_t{1} << lo_;
    f.pending = n.key_nodes[lo_];
    mode_ = Mode::Structure;
  }
  return true;
}

// Characters are counted as code points: a plain byte, a UTF-8 lead byte, or an escape (a
// surrogate pair's second escape is read in State::LowSlash and not counted again).
bool SchemaPrefix::string_byte(uint8_t c) {
  JsonPrefix next = syntax_;
  if (!next.feed(c)) return false;
  const SchemaNode& n = node(value_node_);
  if (syntax_.state() == State::String) {
    if (c == '"') {
      if (count_ < n.min_count) return false;
      mode_ = Mode::Structure;
    } else {
      if (count_ >= n.max_count) return false;
      ++count_;
    }
  }
  syntax_ = next;
  return true;
}

bool SchemaPrefix::number_byte(uint8_t c) {
  JsonPrefix next = syntax_;
  if (!next.feed(c)) return false;
  if (mode_ == Mode::Number && node(value_node_).kind == Kind::Integer) {
    const auto integer = next_integer({negative_, magnitude_, count_}, c, node(value_node_));
    if (!integer) return false;
    syntax_ = next;
    magnitude_ = integer->magnitude, count_ = integer->digits;
    return true;
  }
  if (mode_ == Mode::Match) {
    uint32_t lo = lo_, hi = hi_;
    if (!narrow_sorted(node(value_node_).choices, offset_, c, lo, hi)) return false;
    lo_ = lo, hi_ = hi, ++offset_;
  }
  syntax_ = next;
  return true;
}

// Choices are self-delimiting (strings, literals, containers) except numbers, which end in
// end_number_then: when the syntax says the value ended, the text matched is a whole choice.
bool SchemaPrefix::match_byte(uint8_t c) {
  JsonPrefix next = syntax_;
  if (!next.feed(c)) return false;
  uint32_t lo = lo_, hi = hi_;
  if (!narrow_sorted(node(value_node_).choices, offset_, c, lo, hi)) return false;
  syntax_ = next;
  lo_ = lo, hi_ = hi, ++offset_;
  if (value_ended(next)) mode_ = Mode::Structure;
  return true;
}

bool SchemaPrefix::any_byte(uint8_t c) {
  JsonPrefix next = syntax_;
  if (!next.feed(c)) return false;
  syntax_ = next;
  if (value_ended(next)) mode_ = Mode::Structure;
  return true;
}

}  // namespace ts
