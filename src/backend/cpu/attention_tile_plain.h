// The 16-lane vector of the attention tile kernel (attention_tile_body.h) as a plain array of
// floats: the compiler vectorises its lane loops for whatever instruction set the including file
// targets, and exp is the C library's. A file includes this inside its own target region.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/attention_tile.h"

namespace ts::cpu {
namespace {

struct PlainLanes {
  struct F {
    float x[kLanes];
  };
  template <class Op>
  static F map(const Op& op) {
    F r;
    for (int64_t i = 0; i < kLanes; ++i) r.x[i] = op(i);
    return r;
  }
  static F zero() { return set1(0.0f); }
  static F set1(float a) {
    return map([&](int64_t) { return a; });
  }
  static F load(const float* p) {
    return map([&](int64_t i) { return p[i]; });
  }
  static void store(float* p, const F& a) {
    for (int64_t i = 0; i < kLanes; ++i) p[i] = a.x[i];
  }
  static F bcast(const float* p) { return set1(*p); }
  static F fma(const F& a, const F& b, const F& c) {
    return map([&](int64_t i) { return a.x[i] * b.x[i] + c.x[i]; });
  }
  static F mul(const F& a, const F& b) {
    return map([&](int64_t i) { return a.x[i] * b.x[i]; });
  }
  static F add(const F& a, const F& b) {
    return map([&](int64_t i) { return a.x[i] + b.x[i]; });
  }
  static F max(const F& a, const F& b) {
    return map([&](int64_t i) { return a.x[i] > b.x[i] ? a.x[i] : b.x[i]; });
  }
  static F exp_shifted(const F& s, const F& ref) {
    return map([&](int64_t i) { return s.x[i] == kNegInf ? 0.0f : std::exp(s.x[i] - ref.x[i]); });
  }
  static F finite_or_zero(const F& a) {
    return map([&](int64_t i) { return a.x[i] == kNegInf ? 0.0f : a.x[i]; });
  }
  static F mask_keys(const F& s, float j, const F& lo, const F& hi) {
    return map([&](int64_t i) { return lo.x[i] <= j && j < hi.x[i] ? s.x[i] : kNegInf; });
  }
  static float hsum(const F& a) {
    float s = 0;
    for (int64_t i = 0; i < kLanes; ++i) s += a.x[i];
    return s;
  }
  static void load_row(DType dtype, const uint8_t* src, float* dst, int64_t n) {
    load_kv_head(dtype, src, dst, n);
  }
  static bool scores_few_queries(const QueryBlock&, const TileScratch&, int64_t) { return false; }
  static constexpr float kNegInf = -std::numeric_limits<float>::infinity();
};

}  // namespace
}  // namespace ts::cpu
