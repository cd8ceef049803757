// The q8_0 panel layout (backend/cpu/panel_layout.h): the AVX512-VNNI packer writes what the
// layout describes (every row read back through the portable reader is the row it packed, bit
// for bit), packs in place without touching other panels, and the CPU backend packs exactly the
// weights it can read that way and still embeds and multiplies by them as before.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/panel_layout.h"
#include "quant/dequant.h"
#include "quant/dtype.h"

namespace ts::cpu {
namespace {

// Random q8_0 rows: random codes, f16 scales of both signs.
std::vector<uint8_t> random_q8_0(int64_t rows, int64_t cols, std::mt19937& rng) {
  const size_t stride = row_bytes(DType::Q8_0, cols, "test weight");
  std::vector<uint8_t> bytes(stride * rows);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
  for (size_t blk = 0; blk < bytes.size() / 34; ++blk) {
    const uint16_t h = f32_to_f16(scale(rng));
    std::memcpy(bytes.data() + blk * 34, &h, 2);
  }
  return bytes;
}

std::vector<float> dequantized_row(DType t, const uint8_t* row, int64_t cols) {
  std::vector<float> out(cols);
  dequantize_row(t, row, out.data(), cols);
  return out;
}

TEST(PanelLayout, PackedRowsReadBackBitForBit) {
  if (!panel_kernels_active()) GTEST_SKIP() << "no AVX512-VNNI on the active path: no panels";
  std::mt19937 rng(11);
  const int64_t rows = 96, cols = 1056;
  const size_t stride = row_bytes(DType::Q8_0, cols, "test weight");
  const std::vector<uint8_t> original = random_q8_0(rows, cols, rng);
  std::vector<uint8_t> packed = original;
  // The middle panel only: the others keep their bytes.
  pack_panels(DType::Q8_0, packed.data(), rows, cols, stride, 1, 2);
  const size_t panel_bytes = kPanelRows * stride;
  EXPECT_EQ(0, std::memcmp(packed.data(), original.data(), panel_bytes));
  EXPECT_EQ(0, std::memcmp(packed.data() + 2 * panel_bytes, original.data() + 2 * panel_bytes,
                           panel_bytes));
  EXPECT_NE(0,
            std::memcmp(packed.data() + panel_bytes, original.data() + panel_bytes, panel_bytes));
  pack_panels(DType::Q8_0, packed.data(), rows, cols, stride, 0, 1);
  pack_panels(DType::Q8_0, packed.data(), rows, cols, stride, 2, 3);
  std::vector<float> got(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> want =
        dequantized_row(DType::Q8_0, original.data() + r * stride, cols);
    panel_row_to_f32(packed.data(), stride, r, cols, got.data());
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), cols * sizeof(float))) << "row " << r;
  }
}

TEST(PanelLayout, OnlyWholePanelsOfQ8_0Fit) {
  EXPECT_TRUE(panel_layout_fits(DType::Q8_0, 32));
  EXPECT_TRUE(panel_layout_fits(DType::Q8_0, 128256));
  EXPECT_FALSE(panel_layout_fits(DType::Q8_0, 0));
  EXPECT_FALSE(panel_layout_fits(DType::Q8_0, 48));
  EXPECT_FALSE(panel_layout_fits(DType::Q4_0, 64));
  EXPECT_FALSE(panel_layout_fits(DType::F16, 64));
}

// Through the backend: pack_weight() packs what fits, embed() and matmul() give what they give on
// the same weight unpacked.
TEST(PanelLayout, BackendPacksWhatFitsAndKeepsResults) {
  std::unique_ptr<Backend> be = make_cpu_backend(2);
  EXPECT_EQ(be->weight_row_group(DType::Q8_0), panel_kernels_active() ? kPanelRows : 1);
  EXPECT_EQ(be->weight_row_group(DType::Q4_0), 1);
  std::mt19937 rng(3);
  const int64_t cols = 544;
  const size_t stride = row_bytes(DType::Q8_0, cols, "test weight");
  for (const int64_t rows : {int64_t{96}, int64_t{40}}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    std::vector<uint8_t> plain = random_q8_0(rows, cols, rng);
    std::vector<uint8_t> mine = plain;
    const Weight ref = be->upload_weight(DType::Q8_0, rows, cols, stride, plain.data());
    Weight w = be->upload_weight(DType::Q8_0, rows, cols, stride, mine.data());
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
    // f32 rounding bound of test_quant_matmul: (blocks + 16) ulp of the sum over k of
    // |w_k| (|x_k| + the activation's quantisation step).
    for (const int64_t m : {int64_t{1}, int64_t{5}}) {
      std::vector<float> y_ref(m * rows), y(m * rows);
      be->matmul(ref, e.data(), m, y_ref.data());
      be->matmul(w, e.data(), m, y.data());
      for (int64_t i = 0; i < m * rows; ++i) {
        const float* x = e.data() + (i / rows) * cols;
        const std::vector<float> wr =
            dequantized_row(DType::Q8_0, plain.data() + (i % rows) * stride, cols);
        double mag = 0;
        for (int64_t b = 0; b < cols / 32; ++b) {
          float amax = 0;
          for (int64_t k = 32 * b; k < 32 * b + 32; ++k) amax = std::max(amax, std::fabs(x[k]));
          for (int64_t k = 32 * b; k < 32 * b + 32; ++k)
            mag += std::fabs(wr[k]) * (std::fabs(x[k]) + amax / 127.0);
        }
        const double bound = 2 * (cols / 32 + 16) * static_cast<double>(FLT_EPSILON) * mag;
        ASSERT_NEAR(y[i], y_ref[i], bound) << "M " << m << " i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ts::cpu
