// llama.cpp's searched quantisers (quantize_row_searched): on rows of varied scale every type's
// searched blocks reconstruct at least as well as round to nearest, all-zero blocks stay zero,
// an importance row moves the error off the columns it weighs, and rows that are not whole blocks
// are refused as quantize_row_weights refuses them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/error.h"
#include "quant/dequant.h"
#include "quant/dtype.h"
#include "quant/quantize.h"
#include "quant/quantize_search.h"

namespace ts {
namespace {

constexpr int64_t kN = 4096;

const DType kSearched[] = {DType::Q2_K, DType::Q3_K,   DType::Q4_K,  DType::Q5_K,
                           DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};
const DType kWeighted[] = {DType::Q2_K, DType::Q3_K,   DType::Q4_K,  DType::Q5_K,
                           DType::Q6_K, DType::Q4_0,   DType::Q4_1,  DType::Q5_0,
                           DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS};

// Gaussian values with a scale that changes every 256 elements and a few outliers; block 3 zero.
std::vector<float> test_row(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) {
    const int64_t block = i / 256;
    x[i] = g(rng) * std::ldexp(1.0f, static_cast<int>(block % 7) - 4);
    if (i % 97 == 0) x[i] *= 6;
    if (block == 3) x[i] = 0;
  }
  return x;
}

std::vector<float> round_trip(DType t, const std::vector<float>& x, const float* importance,
                              bool searched) {
  std::vector<uint8_t> q(row_bytes(t, kN, "test row"));
  if (searched)
    quantize_row_searched(t, x.data(), q.data(), kN, importance);
  else
    quantize_row_weights(t, x.data(), q.data(), kN);
  std::vector<float> y(kN);
  dequantize_row(t, q.data(), y.data(), kN);
  return y;
}

// Sum of w (y - x)^2 (w = 1 where null).
double weighted_error(const std::vector<float>& x, const std::vector<float>& y, const float* w) {
  double e = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const double d = double(y[i]) - x[i];
    e += (w != nullptr ? w[i] : 1.0) * d * d;
  }
  return e;
}

TEST(QuantizeSearch, NoWorseThanRoundToNearest) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> x = test_row(seed);
    for (DType t : kSearched) {
      const double searched = weighted_error(x, round_trip(t, x, nullptr, true), nullptr);
      const double rtn = weighted_error(x, round_trip(t, x, nullptr, false), nullptr);
      EXPECT_LE(searched, rtn * 1.001) << dtype_name(t) << " seed " << seed;
    }
  }
}

TEST(QuantizeSearch, ZeroBlocksStayZero) {
  const std::vector<float> x = test_row(4);
  std::vector<float> importance(kN, 1.0f);
  for (DType t : kWeighted)
    for (const float* w :
         {static_cast<const float*>(nullptr), static_cast<const float*>(importance.data())}) {
      const std::vector<float> y = round_trip(t, x, w, true);
      for (int64_t i = 3 * 256; i < 4 * 256; ++i)
        ASSERT_EQ(y[i], 0.0f) << dtype_name(t) << (w ? " weighted" : "") << " at " << i;
    }
}

// Importance 100 on every fourth column, 1 elsewhere: the weighted error falls against the
// unweighted quantiser's, as the search now trades error on the light columns for the heavy.
TEST(QuantizeSearch, ImportanceLowersTheWeightedError) {
  const std::vector<float> x = test_row(5);
  std::vector<float> importance(kN);
  for (int64_t i = 0; i < kN; ++i) importance[i] = i % 4 == 0 ? 100.0f : 1.0f;
  for (DType t : kWeighted) {
    const double weighted =
        weighted_error(x, round_trip(t, x, importance.data(), true), importance.data());
    const double plain = weighted_error(x, round_trip(t, x, nullptr, true), importance.data());
    EXPECT_LT(weighted, plain * 0.95) << dtype_name(t);
  }
}

TEST(QuantizeSearch, PartialBlocksAreRefused) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> out(4096);
  EXPECT_THROW(quantize_row_searched(DType::Q4_K, x.data(), out.data(), 300, nullptr), Error);
  EXPECT_THROW(quantize_row_searched(DType::IQ4_NL, x.data(), out.data(), 40, nullptr), Error);
}

}  // namespace
}  // namespace ts
