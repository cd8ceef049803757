#include "quant/quantize.h"

#include <cstring>

namespace ts {
namespace {

// Quantises n values to int8 with one scale; returns the scale. Written so that the compiler
// vectorises it for plain x86-64 (SSE2): the largest magnitude is found on the float bits (for
// non-NaN floats, |x| orders like its bits with the sign cleared, as an integer), and rounding
// is half away from zero by truncating x / d +- 0.5, with no libm call.
float quantize_block(const float* x, int8_t* q, int n) {
  int32_t max_bits = 0;
  for (int i = 0; i < n; ++i) {
    int32_t bits;
    std::memcpy(&bits, &x[i], sizeof(bits));
    bits &= 0x7FFFFFFF;
    max_bits = bits > max_bits ? bits : max_bits;
  }
  float amax;
  std::memcpy(&amax, &max_bits, sizeof(amax));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) {
    const float v = x[i] * id;
    q[i] = static_cast<int8_t>(static_cast<int>(v + (v >= 0 ? 0.5f : -0.5f)));
  }
  return d;
}

}  // namespace

void quantize_row_q8a32(const float* x, BlockQ8A32* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK32; ++b) {
    BlockQ8A32& out = y[b];
    out.d = quantize_block(x + b * kQK32, out.qs, kQK32);
    int32_t sum = 0;
    for (int i = 0; i < kQK32; ++i) sum += out.qs[i];
    out.sum = sum;
  }
}

void quantize_row_q8k(const float* x, BlockQ8K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b) {
    BlockQ8K& out = y[b];
    out.d = quantize_block(x + b * kQKK, out.qs, kQKK);
    for (int j = 0; j < kQKK / 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += out.qs[16 * j + i];
      out.bsums[j] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace ts
