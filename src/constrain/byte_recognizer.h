// What every byte-level recognizer of constrained generation (JsonPrefix, SchemaPrefix,
// ToolCallPrefix) offers on top of its own feed(c): whole strings, all or nothing. `Derived`
// defines `bool feed(uint8_t)`, which changes its state only when the byte is accepted.
#pragma once

#include <cstdint>
#include <string_view>

namespace ts {

template <class Derived>
class ByteRecognizer {
 public:
  // Whether every byte of `bytes` can follow, in order (the state does not change).
  bool accepts(std::string_view bytes) const {
    Derived next = static_cast<const Derived&>(*this);
    return next.feed_all(bytes);
  }
  // Feeds every byte of `bytes` if all can follow; the state is unchanged if not.
  bool feed_all(std::string_view bytes) {
    Derived next = static_cast<const Derived&>(*this);
    for (char c : bytes)
      if (!next.feed(static_cast<uint8_t>(c))) return false;
    static_cast<Derived&>(*this) = next;
    return true;
  }
};

}  // namespace ts
