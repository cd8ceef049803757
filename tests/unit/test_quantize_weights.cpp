// Weight quantisers: every type round-trips through the reference dequantisation within the error
// its format allows, more bits give less error, and all-zero blocks stay zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/error.h"
#include "quant/blocks.h"
#include "quant/dequant.h"
#include "quant/dtype.h"
#include "quant/quantize.h"

namespace ts {
namespace {

constexpr int64_t kN = 8192;

const DType kAllTypes[] = {DType::F32,  DType::F16,    DType::BF16,   DType::Q4_0,
                           DType::Q4_1, DType::Q5_0,   DType::Q5_1,   DType::Q8_0,
                           DType::Q2_K, DType::Q3_K,   DType::Q4_K,   DType::Q5_K,
                           DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

// Gaussian values whose scale changes every 256 elements (tiny to large), with an all-zero block,
// an all-positive block and an all-negative block, so that every scale path is taken.
std::vector<float> test_row(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) {
    const int64_t block = i / 256;
    const float scale = std::ldexp(1.0f, static_cast<int>(block % 9) - 6);
    x[i] = g(rng) * scale;
    if (block == 3) x[i] = 0.0f;
    if (block == 4) x[i] = std::fabs(x[i]);
    if (block == 5) x[i] = -std::fabs(x[i]);
  }
  return x;
}

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, kN, "test row"));
  quantize_row_weights(t, x.data(), q.data(), kN);
  std::vector<float> y(kN);
  dequantize_row(t, q.data(), y.data(), kN);
  return y;
}

// RMS of (y - x) / RMS of x, per 256-element block, worst block (skipping the zero block).
double worst_relative_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double worst = 0;
  for (int64_t b = 0; b < kN / 256; ++b) {
    double err = 0, ref = 0;
    for (int64_t i = b * 256; i < (b + 1) * 256; ++i) {
      err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
      ref += double(x[i]) * x[i];
    }
    if (ref > 0) worst = std::max(worst, std::sqrt(err / ref));
  }
  return worst;
}

TEST(QuantizeWeights, EveryWeightTypeHasAQuantiser) {
  for (DType t : kAllTypes) {
    EXPECT_TRUE(is_weight_dtype_supported(t)) << dtype_name(t);
    EXPECT_TRUE(can_quantize_weights(t)) << dtype_name(t);
  }
  EXPECT_FALSE(can_quantize_weights(DType::Q8_K));
  // The low-bit types have kernels but no quantiser: refused by name, not written wrong.
  for (DType t : {DType::IQ2_XXS, DType::IQ1_S, DType::TQ2_0}) {
    EXPECT_TRUE(is_weight_dtype_supported(t)) << dtype_name(t);
    EXPECT_FALSE(can_quantize_weights(t)) << dtype_name(t);
  }
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(1024);
  EXPECT_THROW(quantize_row_weights(DType::Q8_K, x.data(), out.data(), 256), Error);
  EXPECT_THROW(quantize_row_weights(DType::IQ2_XXS, x.data(), out.data(), 256), Error);
  EXPECT_THROW(quantize_row_weights(DType::Q4_K, x.data(), out.data(), 100), Error);
}

TEST(QuantizeWeights, ZeroBlocksStayZero) {
  const std::vector<float> x(kN, 0.0f);
  for (DType t : kAllTypes) {
    const std::vector<float> y = round_trip(t, x);
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(y[i], 0.0f) << dtype_name(t) << " element " << i;
  }
}

// The 32-element formats have per-element bounds: half a step, or a whole step where the format
// clamps the side opposite the extreme (q4_0 / q5_0 map the extreme to -half and reach only
// half - 1 on the other side); plus the f16 rounding of the scale and min (2^-11 relative).
TEST(QuantizeWeights, BlockFormatsStayWithinTheirStep) {
  const std::vector<float> x = test_row(1);
  struct Case {
    DType t;
    float steps_per_range;  // range / step
    bool affine;            // step spans [min, max] rather than [-amax, amax]
    float max_err_steps;
  };
  const Case cases[] = {{DType::Q8_0, 127.0f, false, 0.5f},
                        {DType::Q4_0, 8.0f, false, 1.0f},
                        {DType::Q5_0, 16.0f, false, 1.0f},
                        {DType::Q4_1, 15.0f, true, 0.5f},
                        {DType::Q5_1, 31.0f, true, 0.5f}};
  for (const Case& c : cases) {
    const std::vector<float> y = round_trip(c.t, x);
    for (int64_t b = 0; b < kN / 32; ++b) {
      float lo = 0, hi = 0, amax = 0;
      for (int64_t i = b * 32; i < (b + 1) * 32; ++i) {
        lo = i == b * 32 ? x[i] : std::min(lo, x[i]);
        hi = i == b * 32 ? x[i] : std::max(hi, x[i]);
        amax = std::max(amax, std::fabs(x[i]));
      }
      const float step = c.affine ? (hi - lo) / c.steps_per_range : amax / c.steps_per_range;
      const float bound = c.max_err_steps * step + amax * 2e-3f;
      for (int64_t i = b * 32; i < (b + 1) * 32; ++i)
        ASSERT_LE(std::fabs(y[i] - x[i]), bound) << dtype_name(c.t) << " element " << i;
    }
  }
}

// A row that is already on the grid (the decode of a quantised row) quantises to itself for the
// symmetric formats, whose scale is recovered exactly from the extreme element.
TEST(QuantizeWeights, SymmetricFormatsAreIdempotent) {
  const std::vector<float> x = test_row(2);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_0}) {
    const std::vector<float> y = round_trip(t, x);
    const std::vector<float> z = round_trip(t, y);
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(z[i], y[i]) << dtype_name(t) << " element " << i;
  }
}

// Round to nearest over a block's range leaves an error of about step / sqrt(12); the bounds are
// that figure for Gaussian blocks (range ~ 5-6 sigma over 16-32 elements, plus the sub-scale
// codes' rounding) with a factor of 1.5 to spare, and each type must beat the one with a bit less.
TEST(QuantizeWeights, RelativeErrorShrinksWithBits) {
  const std::vector<float> x = test_row(3);
  struct Case {
    DType t;
    double bound;
  };
  const Case cases[] = {{DType::F32, 0.0},    {DType::F16, 3e-4},    {DType::BF16, 3e-3},
                        {DType::Q8_0, 0.012}, {DType::Q6_K, 0.035},  {DType::Q5_0, 0.07},
                        {DType::Q5_1, 0.06},  {DType::Q5_K, 0.06},   {DType::Q4_0, 0.14},
                        {DType::Q4_1, 0.12},  {DType::Q4_K, 0.12},   {DType::Q3_K, 0.30},
                        {DType::Q2_K, 0.55},  {DType::IQ4_NL, 0.13}, {DType::IQ4_XS, 0.13}};
  for (const Case& c : cases) {
    const double e = worst_relative_rms(x, round_trip(c.t, x));
    EXPECT_LE(e, c.bound) << dtype_name(c.t);
  }
  const DType ladder[] = {DType::Q2_K, DType::Q3_K, DType::Q4_K,
                          DType::Q5_K, DType::Q6_K, DType::Q8_0};
  for (size_t i = 1; i < std::size(ladder); ++i)
    EXPECT_LT(worst_relative_rms(x, round_trip(ladder[i], x)),
              worst_relative_rms(x, round_trip(ladder[i - 1], x)))
        << dtype_name(ladder[i]) << " vs " << dtype_name(ladder[i - 1]);
  // The non-linear grid spends its levels where Gaussian weights are: at the same 4.5 bits per
  // weight, iq4_nl beats q4_0's even steps.
  EXPECT_LT(worst_relative_rms(x, round_trip(DType::IQ4_NL, x)),
            worst_relative_rms(x, round_trip(DType::Q4_0, x)));
}

// The iq4 quantisers store each element as the level nearest to it under the step the reader
// will decode (d, or d x the sub-block's scale), up to the rounding of comparing x / step.
TEST(QuantizeWeights, Iq4TypesPickTheNearestLevel) {
  const std::vector<float> x = test_row(5);
  for (DType t : {DType::IQ4_NL, DType::IQ4_XS}) {
    std::vector<uint8_t> q(row_bytes(t, kN, "test row"));
    quantize_row_weights(t, x.data(), q.data(), kN);
    std::vector<float> y(kN);
    dequantize_row(t, q.data(), y.data(), kN);
    for (int64_t i = 0; i < kN; ++i) {
      float step;
      if (t == DType::IQ4_NL) {
        step = f16_to_f32(reinterpret_cast<const BlockIQ4_NL*>(q.data())[i / 32].d);
      } else {
        const BlockIQ4_XS& b = reinterpret_cast<const BlockIQ4_XS*>(q.data())[i / 256];
        step = f16_to_f32(b.d) * static_cast<float>(iq4xs_scale(b, (i % 256) / 32));
      }
      const float slack = std::fabs(step) * 128 * 1e-6f;
      for (int8_t level : kIq4Levels)
        ASSERT_LE(std::fabs(y[i] - x[i]), std::fabs(step * level - x[i]) + slack)
            << dtype_name(t) << " element " << i << " level " << int(level);
    }
  }
}

// MXFP4 as gguf-py quantises: the block's largest magnitude in [8, 16) half scales (the doubled
// e2m1 values reach 12), each element
// the nearest of the 16 values under that scale, and a row on the grid quantises to itself.
TEST(QuantizeWeights, Mxfp4PicksTheNearestValue) {
  const std::vector<float> x = test_row(6);
  const DType t = DType::MXFP4;
  std::vector<uint8_t> q(row_bytes(t, kN, "test row"));
  quantize_row_weights(t, x.data(), q.data(), kN);
  std::vector<float> y(kN);
  dequantize_row(t, q.data(), y.data(), kN);
  for (int64_t b = 0; b < kN / 32; ++b) {
    const float d = mxfp4_half_scale(reinterpret_cast<const BlockMXFP4*>(q.data())[b].e);
    float amax = 0;
    for (int64_t i = b * 32; i < (b + 1) * 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    if (amax > 0) {
      EXPECT_GE(amax, 8 * d) << "block " << b;
      EXPECT_LT(amax, 16 * d) << "block " << b;
    }
    for (int64_t i = b * 32; i < (b + 1) * 32; ++i)
      for (int8_t v : kMxfp4Doubled)
        ASSERT_LE(std::fabs(y[i] - x[i]), std::fabs(d * v - x[i])) << "element " << i;
  }
  const std::vector<float> z = round_trip(t, y);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(z[i], y[i]) << "element " << i;
}

TEST(QuantizeWeights, FloatTypesRoundToNearest) {
  const std::vector<float> x = test_row(4);
  const std::vector<float> f16 = round_trip(DType::F16, x);
  const std::vector<float> bf16 = round_trip(DType::BF16, x);
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(f16[i], f16_to_f32(f32_to_f16(x[i])));
    ASSERT_EQ(bf16[i], bf16_to_f32(f32_to_bf16(x[i])));
  }
  EXPECT_EQ(round_trip(DType::F32, x), x);
}

}  // namespace
}  // namespace ts
