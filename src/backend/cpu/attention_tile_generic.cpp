// The attention tile kernel (attention_tile_body.h) on plain arrays of 16 floats, for CPUs
// without AVX-512: the compiler vectorises the lane loops for the build's baseline instruction
// set, and exp is the C library's.
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/attention_tile_body.h"

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
  static constexpr float kNegInf = -std::numeric_limits<float>::infinity();
};

}  // namespace

void attend_keys_generic(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1,
                         float softcap, const LaneState& st, const TileScratch& ws) {
  attend_keys<PlainLanes>(b, kv, j0, j1, softcap, st, ws);
}

}  // namespace ts::cpu
