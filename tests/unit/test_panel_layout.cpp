// The q8_0, 32-element 4- and 5-bit (mxfp4 among them), q4_k, q5_k, q6_k and iq4_xs panel layouts
// (backend/cpu/panel_layout.h): the AVX512-VNNI packers write what the layout describes (every row
// read back through the portable reader is the row it packed, bit for bit), packs in place without
// touching other panels, and the CPU backend packs exactly the weights it can read that way and
// still embeds and multiplies by them as before.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/panel_layout.h"
#include "quant/blocks.h"
#include "quant/dequant.h"
#include "quant/dtype.h"

namespace ts::cpu {
namespace {

// q4_1, q5_1, q4_k and q5_k: d and the min's scale at the start of each block.
bool has_min(DType t) {
  return t == DType::Q4_1 || t == DType::Q5_1 || t == DType::Q4_K || t == DType::Q5_K;
}

// Random rows of a panel type: random codes and sub-block scales, f16 scales
// (q4_k, q5_k: d and dmin) of both signs.
std::vector<uint8_t> random_rows(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const size_t stride = row_bytes(t, cols, "test weight");
  std::vector<uint8_t> bytes(stride * rows);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
  const uint32_t block = dtype_info(t).block_bytes;
  // mxfp4's scale is an e8m0 byte: 2^-8 .. 2^-1.
  if (t == DType::MXFP4) {
    for (size_t blk = 0; blk < bytes.size() / block; ++blk)
      bytes[blk * block] = static_cast<uint8_t>(120 + byte(rng) % 8);
    return bytes;
  }
  const std::vector<size_t> fields = has_min(t) ? std::vector<size_t>{0, 2}
                                     : t == DType::Q6_K
                                         ? std::vector<size_t>{offsetof(BlockQ6_K, d)}
                                         : std::vector<size_t>{0};
  for (size_t blk = 0; blk < bytes.size() / block; ++blk)
    for (size_t f : fields) {
      const uint16_t h = f32_to_f16(scale(rng));
      std::memcpy(bytes.data() + blk * block + f, &h, 2);
    }
  return bytes;
}

// Columns of a test weight: several blocks (q8_0) or super-blocks (k-quants).
int64_t test_cols(DType t) {
  return dtype_info(t).block_elems == 32 ? 1056 : 1280;
}

std::vector<float> dequantized_row(DType t, const uint8_t* row, int64_t cols) {
  std::vector<float> out(cols);
  dequantize_row(t, row, out.data(), cols);
  return out;
}

// The rows with d zeroed (their min terms alone) for the types with mins; the others as they are.
std::vector<uint8_t> magnitude_rows(DType t, const std::vector<uint8_t>& rows_bytes) {
  std::vector<uint8_t> mins = rows_bytes;
  const uint32_t block = dtype_info(t).block_bytes;
  if (has_min(t))
    for (size_t blk = 0; blk < mins.size() / block; ++blk)
      std::memset(mins.data() + blk * block, 0, 2);
  return mins;
}

// |w_k| per element of row r, as |d term| + |min term| for the types with mins.
std::vector<float> magnitudes(DType t, const std::vector<uint8_t>& plain,
                              const std::vector<uint8_t>& mins, int64_t r, int64_t cols) {
  const size_t stride = row_bytes(t, cols, "test weight");
  std::vector<float> w = dequantized_row(t, plain.data() + r * stride, cols);
  for (auto& v : w) v = std::fabs(v);
  if (!has_min(t)) return w;
  const std::vector<float> m = dequantized_row(t, mins.data() + r * stride, cols);
  for (int64_t k = 0; k < cols; ++k) w[k] = std::fabs(w[k] - m[k]) + std::fabs(m[k]);
  return w;
}

class PanelLayout : public ::testing::TestWithParam<DType> {};

TEST_P(PanelLayout, PackedRowsReadBackBitForBit) {
  if (!panel_kernels_active()) GTEST_SKIP() << "no AVX512-VNNI on the active path: no panels";
  const DType t = GetParam();
  std::mt19937 rng(11);
  const int64_t rows = 96, cols = test_cols(t);
  const size_t stride = row_bytes(t, cols, "test weight");
  const std::vector<uint8_t> original = random_rows(t, rows, cols, rng);
  std::vector<uint8_t> packed = original;
  // The middle panel only: the others keep their bytes.
  pack_panels(t, packed.data(), rows, cols, stride, 1, 2);
  const size_t panel_bytes = kPanelRows * stride;
  EXPECT_EQ(0, std::memcmp(packed.data(), original.data(), panel_bytes));
  EXPECT_EQ(0, std::memcmp(packed.data() + 2 * panel_bytes, original.data() + 2 * panel_bytes,
                           panel_bytes));
  EXPECT_NE(0,
            std::memcmp(packed.data() + panel_bytes, original.data() + panel_bytes, panel_bytes));
  pack_panels(t, packed.data(), rows, cols, stride, 0, 1);
  pack_panels(t, packed.data(), rows, cols, stride, 2, 3);
  std::vector<float> got(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> want = dequantized_row(t, original.data() + r * stride, cols);
    panel_row_to_f32(t, packed.data(), stride, r, cols, got.data());
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), cols * sizeof(float))) << "row " << r;
  }
}

TEST(PanelLayoutFits, OnlyWholePanelsOfThePanelTypes) {
  EXPECT_TRUE(panel_layout_fits(DType::Q8_0, 32));
  EXPECT_TRUE(panel_layout_fits(DType::Q8_0, 128256));
  EXPECT_TRUE(panel_layout_fits(DType::Q4_K, 2048));
  EXPECT_FALSE(panel_layout_fits(DType::Q8_0, 0));
  EXPECT_FALSE(panel_layout_fits(DType::Q8_0, 48));
  EXPECT_FALSE(panel_layout_fits(DType::Q4_K, 48));
  EXPECT_TRUE(panel_layout_fits(DType::Q4_0, 64));
  EXPECT_TRUE(panel_layout_fits(DType::IQ4_NL, 32));
  EXPECT_TRUE(panel_layout_fits(DType::Q4_1, 64));
  EXPECT_TRUE(panel_layout_fits(DType::Q5_0, 96));
  EXPECT_TRUE(panel_layout_fits(DType::Q5_1, 64));
  EXPECT_FALSE(panel_layout_fits(DType::Q5_1, 40));
  EXPECT_FALSE(panel_layout_fits(DType::Q8_1, 64));
  EXPECT_TRUE(panel_layout_fits(DType::Q6_K, 64));
  EXPECT_FALSE(panel_layout_fits(DType::Q6_K, 80));
  EXPECT_TRUE(panel_layout_fits(DType::Q5_K, 64));
  EXPECT_FALSE(panel_layout_fits(DType::Q3_K, 64));
  EXPECT_TRUE(panel_layout_fits(DType::IQ4_XS, 64));
  EXPECT_FALSE(panel_layout_fits(DType::IQ4_XS, 80));
  EXPECT_FALSE(panel_layout_fits(DType::F16, 64));
}

// Through the backend: pack_weight() packs what fits, embed() and matmul() give what they give on
// the same weight unpacked.
TEST_P(PanelLayout, BackendPacksWhatFitsAndKeepsResults) {
  const DType t = GetParam();
  std::unique_ptr<Backend> be = make_cpu_backend(2);
  EXPECT_EQ(be->weight_row_group(t), panel_kernels_active() ? kPanelRows : 1);
  EXPECT_EQ(be->weight_row_group(DType::Q3_K), 1);
  std::mt19937 rng(3);
  const int64_t cols = test_cols(t);
  // Activations are quantised per block of 32 (the 32-element types) or 256 (the others).
  const int64_t act_block = dtype_info(t).block_elems == 32 ? 32 : 256;
  const size_t stride = row_bytes(t, cols, "test weight");
  for (const int64_t rows : {int64_t{96}, int64_t{40}}) {
    SCOPED_TRACE(std::string(dtype_name(t)) + " rows " + std::to_string(rows));
    std::vector<uint8_t> plain = random_rows(t, rows, cols, rng);
    std::vector<uint8_t> mine = plain;
    const Weight ref = be->upload_weight(t, rows, cols, stride, plain.data());
    Weight w = be->upload_weight(t, rows, cols, stride, mine.data());
    be->pack_weight(w);
    const bool fits = panel_kernels_active() && rows % kPanelRows == 0;
    EXPECT_EQ(w.layout, fits ? WeightLayout::Panels : WeightLayout::Rows);
    EXPECT_EQ(fits, mine != plain);

    const std::vector<int32_t> ids = {0, 31, 32, static_cast<int32_t>(rows - 1), 7};
    const int64_t M = static_cast<int64_t>(ids.size());
    std::vector<float> e_ref(M * cols), e(M * cols);
    be->embed(ref, ids.data(), M, 0.5f, e_ref.data());
    be->embed(w, ids.data(), M, 0.5f, e.data());
    EXPECT_EQ(e, e_ref);

    // Both matmul paths of the packed layout against the row layout's kernels, within twice the
    // f32 rounding bound of test_quant_matmul: (2 x blocks + 16) ulp of the sum over k of
    // |w_k| (|x_k| + the activation's quantisation step), with the d and dmin terms of q4_k and
    // q5_k taken apart (they may cancel).
    const std::vector<uint8_t> parts = magnitude_rows(t, plain);
    for (const int64_t m : {int64_t{1}, int64_t{5}}) {
      std::vector<float> y_ref(m * rows), y(m * rows);
      be->matmul(ref, e.data(), m, y_ref.data());
      be->matmul(w, e.data(), m, y.data());
      for (int64_t i = 0; i < m * rows; ++i) {
        const float* x = e.data() + (i / rows) * cols;
        const std::vector<float> wr = magnitudes(t, plain, parts, i % rows, cols);
        double mag = 0;
        for (int64_t b = 0; b < cols / act_block; ++b) {
          float amax = 0;
          for (int64_t k = act_block * b; k < act_block * (b + 1); ++k)
            amax = std::max(amax, std::fabs(x[k]));
          for (int64_t k = act_block * b; k < act_block * (b + 1); ++k)
            mag += wr[k] * (std::fabs(x[k]) + amax / 127.0);
        }
        const double bound =
            2 * (2 * cols / act_block + 16) * static_cast<double>(FLT_EPSILON) * mag;
        ASSERT_NEAR(y[i], y_ref[i], bound) << "M " << m << " i " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PanelTypes, PanelLayout,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::Q5_0,
                                           DType::Q4_1, DType::Q5_1, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K, DType::IQ4_XS, DType::MXFP4),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace ts::cpu
