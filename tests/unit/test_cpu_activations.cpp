// The CPU backend's vectorised activation quantisation gives the same bytes as the plain
// quantize_row_q8a32 (the tests of the matmul paths rely on one quantisation of the activations).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/activations.h"
#include "backend/cpu/matmul_kernels.h"
#include "quant/blocks.h"
#include "quant/quantize.h"

namespace ts {
namespace {

TEST(CpuActivations, Q8A32QuantisationMatchesThePlainLoop) {
  if (!cpu::isa_available(cpu::Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int64_t n = 64 * kQK32;
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  // Blocks whose values land exactly on .5 after scaling (ties round away from zero), all zeros,
  // negative zero, one huge value, subnormals.
  for (int i = 0; i < kQK32; ++i) x[static_cast<size_t>(i)] = (i - 16) * 0.5f;
  x[31] = 127.0f;
  for (int i = 0; i < kQK32; ++i) x[static_cast<size_t>(kQK32 + i)] = 0.0f;
  x[static_cast<size_t>(2 * kQK32 + 3)] = -0.0f;
  x[static_cast<size_t>(3 * kQK32 + 5)] = 3e38f;
  for (int i = 0; i < kQK32; ++i)
    x[static_cast<size_t>(4 * kQK32 + i)] = std::numeric_limits<float>::denorm_min() * (i - 9);
  std::vector<BlockQ8A32> want(static_cast<size_t>(n / kQK32)), got(want.size());
  quantize_row_q8a32(x.data(), want.data(), n);
  cpu::quantize_row_q8a32_avx512(x.data(), got.data(), n);
  for (size_t b = 0; b < want.size(); ++b)
    EXPECT_EQ(0, std::memcmp(&want[b], &got[b], sizeof(BlockQ8A32))) << "block " << b;
}

}  // namespace
}  // namespace ts
