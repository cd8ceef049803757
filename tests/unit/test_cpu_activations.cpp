// The CPU backend's vectorised activation quantisation gives the same bytes as the plain
// quantize_row_q8a32 (the tests of the matmul paths rely on one quantisation of the activations);
// its vectorised SwiGLU and GeGLU are within a few ulp of the exact values, tails included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// Within 8 + |arg[i]| units in the last place of the exact value (computed in double): e^x
// carries the float rounding of its argument x times |x|. Values below the normal floats (flushed
// or rounded there) are held to that floor.
void expect_close(const std::vector<double>& exact, const std::vector<float>& got,
                  const std::vector<double>& arg, const char* what) {
  for (size_t i = 0; i < exact.size(); ++i) {
    const double floor = std::numeric_limits<float>::min();
    const double tol =
        std::max(floor, (8 + std::fabs(arg[i])) * std::numeric_limits<float>::epsilon() *
                            std::fabs(exact[i]));
    EXPECT_NEAR(got[i], exact[i], tol) << what << " element " << i;
  }
}

TEST(CpuActivations, GatedUnitsAreWithinAFewUlps) {
  if (!cpu::isa_available(cpu::Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  const int64_t n = 16 * 37 + 5;  // a masked tail
  std::vector<float> gate(static_cast<size_t>(n)), up(gate.size());
  for (float& v : gate) v = dist(rng);
  for (float& v : up) v = dist(rng);
  // Saturation both ways, zero, negative zero.
  gate[0] = 120.0f, gate[1] = -120.0f, gate[2] = 0.0f, gate[3] = -0.0f;
  // GELU's tanh form as the kernel computes it, g / (1 + e^(-2u)): 0.5 g (1 + tanh(u)) in float
  // loses the small values of negative g to the cancellation in 1 + tanh(u).
  std::vector<double> exact(gate.size()), arg(gate.size());
  std::vector<float> got(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    arg[i] = -g;
    exact[i] = g / (1.0 + std::exp(arg[i])) * up[i];
  }
  cpu::swiglu_avx512(gate.data(), up.data(), n, got.data());
  expect_close(exact, got, arg, "swiglu");
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    arg[i] = -2.0 * std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g);
    exact[i] = g / (1.0 + std::exp(arg[i])) * up[i];
  }
  cpu::geglu_avx512(gate.data(), up.data(), n, got.data());
  expect_close(exact, got, arg, "geglu");
  for (size_t i = 0; i < gate.size(); ++i) exact[i] /= up[i];
  cpu::gelu_tanh_avx512(gate.data(), n, got.data());
  expect_close(exact, got, arg, "gelu_tanh");
}

}  // namespace
}  // namespace ts
