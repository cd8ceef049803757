// The CUDA ops that multi-head latent attention and Gemma 4's per-layer inputs add (ctest label
// `cuda`; skips without a device): matmul_heads as the per-head matmuls it stands for, copy_rows
// and scale as the CPU backend's. (Their routing is test_cuda_ops' RouteMatchesHostRouting.)
#include <gtest/gtest.h>

#ifdef TURBOSPARK_HAVE_CUDA

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cuda_op_test.h"
#include "fixture_models.h"
#include "quant/blocks.h"
#include "quant/dequant.h"
#include "quant/dtype.h"

namespace ts {
namespace {

class CudaLatentOps : public test::CudaOpTest {
 protected:
  // A random weight of `rows` x `cols` in type t (f32, bf16 or q8_0), its host bytes.
  std::vector<uint8_t> random_weight(DType t, int64_t rows, int64_t cols) {
    const size_t stride = row_bytes(t, static_cast<uint64_t>(cols), "test weight");
    std::vector<uint8_t> w(static_cast<size_t>(rows) * stride);
    const std::vector<float> v = randn(static_cast<size_t>(rows * cols), 0.1f);
    std::uniform_int_distribution<int> q(-127, 127);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < cols; ++i) {
        uint8_t* row = w.data() + r * stride;
        const float x = v[static_cast<size_t>(r * cols + i)];
        if (t == DType::F32) std::memcpy(row + 4 * i, &x, 4);
        if (t == DType::BF16) {
          const uint16_t h = f32_to_bf16(x);
          std::memcpy(row + 2 * i, &h, 2);
        }
        if (t == DType::Q8_0) {
          auto* blk = reinterpret_cast<BlockQ8_0*>(row) + i / kQK32;
          blk->d = f32_to_f16(0.004f);
          blk->qs[i % kQK32] = static_cast<int8_t>(q(rng_));
        }
      }
    return w;
  }
};

// matmul_heads in the two layouts MLA asks for: inputs side by side and outputs apart (k_b: into
// the queries' latent part), inputs apart and outputs side by side (v_b: from the attention's
// rows). Each head of each row gets the bits of a one-row matmul of its block over its input
// alone, packed weights (q8_0's row groups) included; f32 against the CPU backend too.
TEST_F(CudaLatentOps, MatmulHeadsAsPerHeadMatmuls) {
  const int64_t H = 4, rows = 32, cols = 64, pad = 16;
  for (const DType t : {DType::F32, DType::BF16, DType::Q8_0})
    for (const bool packed : {false, true})
      for (const int64_t M : {int64_t{1}, int64_t{5}})
        for (const bool spread_inputs : {false, true}) {
          const std::string what = std::string(dtype_name(t)) + (packed ? " packed" : "") +
                                   " M=" + std::to_string(M) +
                                   (spread_inputs ? " (v_b layout)" : " (k_b layout)");
          const size_t stride = row_bytes(t, static_cast<uint64_t>(cols), "test weight");
          const std::vector<uint8_t> host = random_weight(t, H * rows, cols);
          Weight w = gpu_->upload_weight(t, H * rows, cols, stride, host.data());
          if (packed) gpu_->pack_weight(w);
          const int64_t x_head = spread_inputs ? cols + pad : cols;
          const int64_t y_head = spread_inputs ? rows : rows + pad;
          const std::vector<float> x = randn(static_cast<size_t>(M * H * x_head));
          float* dx = upload(x);
          float* dy = upload(std::vector<float>(static_cast<size_t>(M * H * y_head), 7.0f));
          gpu_->matmul_heads(w, H, dx, H * x_head, x_head, M, dy, H * y_head, y_head);
          const std::vector<float> got = download(dy, static_cast<size_t>(M * H * y_head));
          std::vector<float> cpu_y(got.size(), 7.0f);
          if (t == DType::F32) {
            const Weight wc = cpu_->upload_weight(t, H * rows, cols, stride, host.data());
            cpu_->matmul_heads(wc, H, x.data(), H * x_head, x_head, M, cpu_y.data(), H * y_head,
                               y_head);
            test::expect_close(got, cpu_y, 1e-6f, 1e-5f, what + " against the CPU");
          }
          for (int64_t m = 0; m < M; ++m)
            for (int64_t h = 0; h < H; ++h) {
              Weight head = w;
              head.rows = rows;
              head.data = static_cast<const uint8_t*>(w.data) + h * rows * w.row_stride;
              const std::vector<float> xh(x.begin() + (m * H + h) * x_head,
                                          x.begin() + (m * H + h) * x_head + cols);
              float* out = upload(std::vector<float>(static_cast<size_t>(rows)));
              gpu_->matmul(head, upload(xh), 1, out);
              const std::vector<float> want = download(out, static_cast<size_t>(rows));
              EXPECT_EQ(0, std::memcmp(want.data(), got.data() + (m * H + h) * y_head,
                                       want.size() * sizeof(float)))
                  << what << ", row " << m << " head " << h;
              // The gaps between the heads' outputs are left as they were.
              for (int64_t i = rows; i < y_head; ++i)
                EXPECT_EQ(got[static_cast<size_t>((m * H + h) * y_head + i)], 7.0f) << what;
            }
          gpu_->release_weight(w);
        }
}

// A prefill's rows over many heads, taken in several launches (their gathered rows would pass the
// backend's scratch bound in one), against the CPU backend.
TEST_F(CudaLatentOps, MatmulHeadsOverManyRowsAsTheCpu) {
  const int64_t H = 512, rows = 8, cols = 32, pad = 8, M = 300;
  const size_t stride = static_cast<size_t>(cols) * sizeof(float);
  const std::vector<uint8_t> host = random_weight(DType::F32, H * rows, cols);
  Weight w = gpu_->upload_weight(DType::F32, H * rows, cols, stride, host.data());
  const Weight wc = cpu_->upload_weight(DType::F32, H * rows, cols, stride, host.data());
  for (const bool spread_inputs : {false, true}) {
    const int64_t x_head = spread_inputs ? cols + pad : cols;
    const int64_t y_head = spread_inputs ? rows : rows + pad;
    const std::vector<float> x = randn(static_cast<size_t>(M * H * x_head));
    std::vector<float> want(static_cast<size_t>(M * H * y_head), 7.0f);
    float* dy = upload(want);
    cpu_->matmul_heads(wc, H, x.data(), H * x_head, x_head, M, want.data(), H * y_head, y_head);
    gpu_->matmul_heads(w, H, upload(x), H * x_head, x_head, M, dy, H * y_head, y_head);
    test::expect_close(download(dy, want.size()), want, 1e-6f, 1e-5f,
                       spread_inputs ? "v_b layout" : "k_b layout");
  }
  gpu_->release_weight(w);
}

TEST_F(CudaLatentOps, CopyRowsAndScaleAsTheCpu) {
  const int64_t rows = 7, n = 300, src_stride = 333, dst_stride = 310;
  const std::vector<float> src = randn(static_cast<size_t>(rows * src_stride));
  std::vector<float> want = randn(static_cast<size_t>(rows * dst_stride));
  float* d_dst = upload(want);
  cpu_->copy_rows(want.data(), dst_stride, src.data(), src_stride, rows, n);
  gpu_->copy_rows(d_dst, dst_stride, upload(src), src_stride, rows, n);
  EXPECT_EQ(download(d_dst, want.size()), want) << "copy_rows";
  cpu_->scale(want.data(), static_cast<int64_t>(want.size()), 0.7071f);
  gpu_->scale(d_dst, static_cast<int64_t>(want.size()), 0.7071f);
  EXPECT_EQ(download(d_dst, want.size()), want) << "scale";
}

}  // namespace
}  // namespace ts

#else

TEST(CudaLatentOps, SkippedWithoutCudaBuild) {
  GTEST_SKIP() << "built without CUDA";
}

#endif
