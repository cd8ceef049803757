// Reference dequantisation and half-float conversions against vectors frozen from the gguf
// package's numpy code (tools/gen_quant_vectors.py): bit-exact, NaN matching any NaN.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/dequant.h"
#include "quant/dtype.h"
#include "test_paths.h"

namespace ts {
namespace {

std::vector<uint8_t> read_fixture(const std::string& name) {
  const std::string path = test::fixtures_dir() + "/quant/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <class T>
std::vector<T> read_array(const std::string& name) {
  const std::vector<uint8_t> bytes = read_fixture(name);
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

class DequantVectors : public ::testing::TestWithParam<DType> {};

TEST_P(DequantVectors, MatchesGgufNumpyBitExactly) {
  const DType t = GetParam();
  const std::string name = dtype_name(t);
  const std::vector<uint8_t> blocks = read_fixture(name + ".blocks");
  const std::vector<float> expected = read_array<float>(name + ".f32");
  const DTypeInfo& info = dtype_info(t);
  ASSERT_EQ(blocks.size() % info.block_bytes, 0u);
  const int64_t n = static_cast<int64_t>(blocks.size() / info.block_bytes * info.block_elems);
  ASSERT_EQ(static_cast<size_t>(n), expected.size());
  ASSERT_GT(n, 0);

  std::vector<float> got(n);
  dequantize_row(t, blocks.data(), got.data(), n);
  int mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (same_float(got[i], expected[i])) continue;
    if (++mismatches <= 5)
      ADD_FAILURE() << name << " element " << i << " (block " << i / info.block_elems << "): got "
                    << got[i] << " expected " << expected[i];
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, DequantVectors,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0,
                                           DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                           DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4,
                                           DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                                           DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S, DType::IQ1_M,
                                           DType::TQ1_0, DType::TQ2_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Every entry of each i-quant grid, through blocks that use them all (<type>.grid.blocks): the
// FNV-1a 64 hash of the dequantised f32 bytes is gguf's (kept as a hash: the floats would be
// hundreds of KB).
uint64_t fnv1a64(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(data)[i]) * 0x100000001b3ull;
  return h;
}

class DequantGrids : public ::testing::TestWithParam<DType> {};

TEST_P(DequantGrids, EveryGridEntryMatchesGguf) {
  const DType t = GetParam();
  const std::string name = dtype_name(t);
  const std::vector<uint8_t> blocks = read_fixture(name + ".grid.blocks");
  const std::vector<uint8_t> hex = read_fixture(name + ".grid.fnv1a");
  const uint64_t want = std::stoull(std::string(hex.begin(), hex.end()), nullptr, 16);
  const DTypeInfo& info = dtype_info(t);
  ASSERT_GT(blocks.size(), 0u);
  ASSERT_EQ(blocks.size() % info.block_bytes, 0u);
  const int64_t n = static_cast<int64_t>(blocks.size() / info.block_bytes * info.block_elems);
  std::vector<float> got(static_cast<size_t>(n));
  dequantize_row(t, blocks.data(), got.data(), n);
  for (float v : got) ASSERT_TRUE(std::isfinite(v));  // sane scales: a hash of NaNs proves little
  EXPECT_EQ(fnv1a64(got.data(), got.size() * sizeof(float)), want) << name;
}

INSTANTIATE_TEST_SUITE_P(IQuants, DequantGrids,
                         ::testing::Values(DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                                           DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,
                                           DType::IQ1_M),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(HalfConversion, F32ToF16RoundsLikeNumpy) {
  const std::vector<float> src = read_array<float>("f32_to_half.f32");
  const std::vector<uint16_t> expected = read_array<uint16_t>("f32_to_half.f16");
  ASSERT_EQ(src.size(), expected.size());
  ASSERT_GT(src.size(), 1000u);
  for (size_t i = 0; i < src.size(); ++i) {
    const uint16_t got = f32_to_f16(src[i]);
    if (std::isnan(src[i]))
      EXPECT_TRUE(std::isnan(f16_to_f32(got))) << "NaN input " << i;
    else
      ASSERT_EQ(got, expected[i]) << "input " << i << " = " << src[i];
  }
}

TEST(HalfConversion, F32ToBf16RoundsLikeGgml) {
  const std::vector<float> src = read_array<float>("f32_to_half.f32");
  const std::vector<uint16_t> expected = read_array<uint16_t>("f32_to_half.bf16");
  ASSERT_EQ(src.size(), expected.size());
  for (size_t i = 0; i < src.size(); ++i)
    ASSERT_EQ(f32_to_bf16(src[i]), expected[i]) << "input " << i << " = " << src[i];
}

TEST(HalfConversion, EveryF16RoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7C00, 0x7C00u);
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(HalfConversion, EveryBf16RoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), h) << "bf16 0x" << std::hex << h;
  }
}

TEST(DequantizeRow, RefusesPartialBlocks) {
  std::vector<uint8_t> raw(34);
  std::vector<float> out(32);
  EXPECT_THROW(dequantize_row(DType::Q8_0, raw.data(), out.data(), 31), Error);
  EXPECT_THROW(dequantize_row(DType::I32, raw.data(), out.data(), 1), Error);
}

}  // namespace
}  // namespace ts
