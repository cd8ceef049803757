// Half-precision conversions in integer arithmetic, so that they are exact and identical on every
// machine (no dependence on F16C or the FPU's rounding mode).
#include <bit>
#include <cstdint>

#include "quant/dequant.h"

namespace ts {
namespace {

// Rounds `value >> shift` to nearest, ties to even (shift in 1..31).
uint32_t shift_round_even(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}

}  // namespace

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf, NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24, exact in f32.
  const float magnitude = static_cast<float>(mant) * 0x1p-24f;
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
}

uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs > 0x7F800000) return sign | 0x7E00 | ((abs >> 13) & 0x3FF);  // NaN stays a quiet NaN
  // 65520 is halfway between the largest half (65504) and 65536; it and above round to inf.
  if (abs >= 0x477FF000) return sign | 0x7C00;
  const uint32_t exp = abs >> 23;
  if (exp >= 113) {  // normal half: rebias the exponent, round the mantissa from 23 to 10 bits
    const uint32_t rebased = ((exp - 112) << 23) | (abs & 0x7FFFFF);
    return sign | static_cast<uint16_t>(shift_round_even(rebased, 13));
  }
  // Subnormal half (or zero): count units of 2^-24; the significand is (1.m) * 2^(exp - 150).
  const int shift = 126 - static_cast<int>(exp);
  if (shift > 24) return sign;  // below 2^-25: rounds to zero (2^-25 itself ties to even zero)
  const uint32_t significand = (abs & 0x7FFFFF) | 0x800000;
  return sign | static_cast<uint16_t>(shift_round_even(significand, shift));
}

float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

}  // namespace ts
