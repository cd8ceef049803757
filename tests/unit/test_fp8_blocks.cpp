// FP8 block-quantised checkpoints: e4m3 bytes decode as the format defines them, each weight is
// its bytes times its own 128 x 128 block's scale (edge blocks partial), and a scale tensor that
// does not fit the weight, or none, is refused naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/fp8_blocks.h"
#include "formats/safetensors.h"
#include "formats_test_util.h"

namespace ts {
namespace {

TEST(Fp8Blocks, E4m3BytesDecode) {
  EXPECT_EQ(fp8_e4m3_value(0x38), 1.0f);  // exponent 7 (the bias), mantissa 0
  EXPECT_EQ(fp8_e4m3_value(0xB8), -1.0f);
  EXPECT_EQ(fp8_e4m3_value(0x3C), 1.5f);                  // mantissa 4 of 8
  EXPECT_EQ(fp8_e4m3_value(0x7E), 448.0f);                // the largest
  EXPECT_EQ(fp8_e4m3_value(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(fp8_e4m3_value(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(fp8_e4m3_value(0x00), 0.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_value(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_value(0xFF)));
}

constexpr uint64_t kRows = 200, kCols = 300;  // 2 x 3 blocks of 128, the last ones partial

class Fp8Dir : public ::testing::Test {
 protected:
  // A directory holding weight `w` [kRows, kCols] in FP8 and, unless scale_shape is empty, its
  // scale_inv of that shape (f32, block b's scale 0.5 + b).
  std::string write(const std::vector<uint64_t>& scale_shape) {
    q_.resize(kRows * kCols);
    for (size_t i = 0; i < q_.size(); ++i) q_[i] = static_cast<uint8_t>((i * 37 + i / 7) % 0x7F);
    uint64_t n_scale = 1;
    for (uint64_t d : scale_shape) n_scale *= d;
    std::vector<float> scale(n_scale);
    for (size_t b = 0; b < scale.size(); ++b) scale[b] = 0.5f + static_cast<float>(b);
    nlohmann::json h;
    h["w"] = {{"dtype", "F8_E4M3"}, {"shape", {kRows, kCols}}, {"data_offsets", {0, q_.size()}}};
    std::vector<uint8_t> data(q_);
    if (!scale_shape.empty()) {
      h["w_scale_inv"] = {{"dtype", "F32"},
                          {"shape", scale_shape},
                          {"data_offsets", {data.size(), data.size() + 4 * n_scale}}};
      const auto* p = reinterpret_cast<const uint8_t*>(scale.data());
      data.insert(data.end(), p, p + 4 * n_scale);
    }
    test::write_file(dir_.file("model.safetensors"), test::safetensors_bytes(h.dump(), data));
    test::write_file(dir_.file("config.json"), std::string(R"({"architectures": ["X"]})"));
    return dir_.path();
  }

  test::TempDir dir_;
  std::vector<uint8_t> q_;
};

TEST_F(Fp8Dir, EachBlockTakesItsOwnScale) {
  const auto d = HfDirectory::open(write({2, 3}));
  const auto found = d->find("w");
  ASSERT_NE(found.tensor, nullptr);
  ASSERT_EQ(found.tensor->dtype, DType::F32);
  EXPECT_EQ(found.tensor->dims, (std::vector<uint64_t>{kCols, kRows}));
  std::vector<float> w(kRows * kCols);
  std::memcpy(w.data(), found.file->tensor_data(*found.tensor), w.size() * 4);
  for (uint64_t r = 0; r < kRows; ++r)
    for (uint64_t c = 0; c < kCols; ++c) {
      const float scale = 0.5f + static_cast<float>((r / 128) * 3 + c / 128);
      ASSERT_EQ(w[r * kCols + c], fp8_e4m3_value(q_[r * kCols + c]) * scale)
          << "row " << r << " col " << c;
    }
}

TEST_F(Fp8Dir, ScaleOfTheWrongShapeIsRefusedNamingIt) {
  try {
    HfDirectory::open(write({2, 2}));
    FAIL() << "opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Model);
    EXPECT_NE(std::string(e.what()).find("tensor 'w_scale_inv' is f32 [2, 2], expected f32 or "
                                         "bf16 [2, 3] (one scale per 128 x 128 block of 'w' "
                                         "[200, 300])"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Fp8Dir, MissingScaleIsRefusedNamingTheWeight) {
  try {
    HfDirectory::open(write({}));
    FAIL() << "opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Model);
    EXPECT_NE(std::string(e.what()).find("FP8 tensor 'w' has no 'w_scale_inv'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ts
