// Checked byte arithmetic. Headers claim counts and sizes; multiplying two claims can wrap a
// uint64 and turn a 2^63-byte tensor into a small one that passes a bounds check.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace ts {

inline uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(ErrorKind::Model, what + ": size overflows 64 bits");
  return r;
}

inline uint64_t checked_add(uint64_t a, uint64_t b, const std::string& what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(ErrorKind::Model, what + ": size overflows 64 bits");
  return r;
}

inline uint64_t align_up(uint64_t x, uint64_t alignment, const std::string& what) {
  const uint64_t r = x % alignment;
  return r == 0 ? x : checked_add(x, alignment - r, what);
}

}  // namespace ts
