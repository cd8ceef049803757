// The CUDA backend's Gated DeltaNet ops (conv_silu, delta_rule), the gated shared-expert sum
// (add_gated_rows) and the sigmoid GLU on random data against the CPU backend: the same formulas,
// summed in another order, so within a few f32 roundings a row. Each sequence op runs twice on
// the same state, as decode continues a prefill. Skips when no CUDA device is present.
#include <gtest/gtest.h>

#ifdef TURBOSPARK_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"
#include "cuda_op_test.h"
#include "fixture_models.h"

namespace ts {
namespace {

// Its own seed, so that the inputs stay those the tests were written with.
class CudaDeltaNet : public test::CudaOpTest {
 protected:
  void SetUp() override {
    rng_.seed(4321);
    CudaOpTest::SetUp();
  }

  std::vector<float> uniform(int64_t n, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng_);
    return v;
  }
};

// Channel counts that leave a partial block; every kernel size the backend takes, Qwen3-Next's
// (4) among them; rows fewer than the window, one decode row, and prefill lengths.
TEST_F(CudaDeltaNet, ConvSiluAsCpuAcrossTwoCalls) {
  const int64_t channels = 200;
  for (int64_t kernel = 1; kernel <= 8; ++kernel)
    for (const int64_t M : {1, 3, 64, 100}) {
      const std::string what = "kernel " + std::to_string(kernel) + " M " + std::to_string(M);
      const int64_t past = kernel - 1;
      const std::vector<float> taps = randn(channels * kernel, 0.5f);
      // At least one element: an allocation of none is not one to test here.
      std::vector<float> window = randn(std::max<int64_t>(past * channels, 1));
      const float* d_taps = upload(taps);
      float* d_window = upload(window);
      // A prefill of M rows, then a decode row on the window it leaves.
      for (const int64_t rows : {M, int64_t{1}}) {
        std::vector<float> x = randn(rows * channels, 2.0f);
        float* d_x = upload(x);
        cpu_->conv_silu(x.data(), rows, channels, taps.data(), kernel, window.data());
        gpu_->conv_silu(d_x, rows, channels, d_taps, kernel, d_window);
        test::expect_close(download(d_x, x.size()), x, 1e-6f, 1e-5f,
                           what + " rows " + std::to_string(rows));
        test::expect_close(download(d_window, window.size()), window, 0.0f, 0.0f, what + " window");
      }
    }
}

struct DeltaCase {
  int64_t n_k, n_v, dk, dv;
  bool tiled;
};

// Qwen3-Next's shape (16 key heads of 128, 32 value heads of 128, grouped) scaled down to a few
// heads; Qwen3.5's tiled order; a value head width that leaves a partial column block and a key
// head width that is not a multiple of the warps; the widest key heads taken.
TEST_F(CudaDeltaNet, DeltaRuleAsCpuAcrossTwoCalls) {
  for (const DeltaCase c : {DeltaCase{2, 4, 128, 128, false}, DeltaCase{2, 6, 128, 128, true},
                            DeltaCase{1, 3, 100, 80, false}, DeltaCase{3, 3, 64, 32, true},
                            DeltaCase{1, 2, 256, 256, true}})
    for (const int64_t M : {1, 3, 64, 100}) {
      const std::string what = "n_k " + std::to_string(c.n_k) + " n_v " + std::to_string(c.n_v) +
                               " dk " + std::to_string(c.dk) + " dv " + std::to_string(c.dv) +
                               (c.tiled ? " tiled" : " grouped") + " M " + std::to_string(M);
      const int64_t width = 2 * c.n_k * c.dk + c.n_v * c.dv, out_width = c.n_v * c.dv;
      // a = -exp(A_log) and dt_bias as a trained layer's spread: decays from ~0.2 to ~1.
      const std::vector<float> a = uniform(c.n_v, -1.5f, -0.05f), dt_bias = randn(c.n_v);
      std::vector<float> state = randn(c.n_v * c.dk * c.dv, 0.1f);
      DeltaRuleArgs host{c.n_k, c.n_v, c.dk, c.dv, c.tiled, a.data(), dt_bias.data()};
      DeltaRuleArgs dev = host;
      dev.a = upload(a);
      dev.dt_bias = upload(dt_bias);
      float* d_state = upload(state);
      // A prefill of M rows, then three decode-sized rows on the state it leaves.
      for (const int64_t rows : {M, int64_t{3}}) {
        const std::vector<float> qkv = randn(rows * width), beta = randn(rows * c.n_v),
                                 alpha = randn(rows * c.n_v);
        std::vector<float> want(static_cast<size_t>(rows * out_width));
        cpu_->delta_rule(qkv.data(), beta.data(), alpha.data(), rows, host, state.data(),
                         want.data());
        float* d_out = upload(std::vector<float>(want.size()));
        gpu_->delta_rule(upload(qkv), upload(beta), upload(alpha), rows, dev, d_state, d_out);
        const std::string call = what + " rows " + std::to_string(rows);
        test::expect_close(download(d_out, want.size()), want, 2e-5f, 1e-4f, call + " out");
        test::expect_close(download(d_state, state.size()), state, 2e-5f, 1e-4f, call + " state");
      }
    }
}

TEST_F(CudaDeltaNet, RefusesShapesWithoutKernels) {
  float* d = upload(std::vector<float>(1024));
  EXPECT_THROW(gpu_->conv_silu(d, 1, 8, d, 9, d), Error);
  const DeltaRuleArgs wide{1, 1, 512, 64, false, d, d};
  EXPECT_THROW(gpu_->delta_rule(d, d, d, 1, wide, d, d), Error);
  const DeltaRuleArgs uneven{2, 3, 64, 64, false, d, d};
  EXPECT_THROW(gpu_->delta_rule(d, d, d, 1, uneven, d, d), Error);
}

TEST_F(CudaDeltaNet, AddGatedRowsAsCpu) {
  for (const int64_t M : {1, 5}) {
    const int64_t n = 1000;
    const std::vector<float> x = randn(M * n), g = randn(M, 3.0f);
    std::vector<float> y = randn(M * n);
    float* d_y = upload(y);
    cpu_->add_gated_rows(y.data(), x.data(), g.data(), M, n);
    gpu_->add_gated_rows(d_y, upload(x), upload(g), M, n);
    test::expect_close(download(d_y, y.size()), y, 1e-7f, 1e-6f,
                       "add_gated_rows M " + std::to_string(M));
  }
}

// Both layouts (separate gate and up rows; each row [gate | up]), one row and several, a width of
// whole 16-byte vectors and one without: every path of the CUDA glu.
TEST_F(CudaDeltaNet, SigmoidGluAsCpu) {
  for (const int64_t M : {1, 3})
    for (const int64_t n : {1000, 999})
      for (const bool stacked : {false, true}) {
        const int64_t stride = stacked ? 2 * n : n;
        const std::vector<float> gate = randn(M * stride, 3.0f), up = randn(M * stride);
        const float* d_gate = upload(gate);
        const float* d_up = upload(up);
        const int64_t up_at = stacked ? n : 0;
        const float* g_host = gate.data();
        const float* u_host = stacked ? gate.data() + up_at : up.data();
        const float* g_dev = d_gate;
        const float* u_dev = stacked ? d_gate + up_at : d_up;
        std::vector<float> want(static_cast<size_t>(M * n));
        cpu_->glu(Glu::Sigmoid, g_host, u_host, M, n, stride, want.data());
        float* d_out = upload(std::vector<float>(want.size()));
        gpu_->glu(Glu::Sigmoid, g_dev, u_dev, M, n, stride, d_out);
        test::expect_close(download(d_out, want.size()), want, 1e-7f, 1e-6f,
                           "sigmoid glu M " + std::to_string(M) + " n " + std::to_string(n) +
                               (stacked ? " stacked" : " separate"));
      }
}

// Timing, not a check (run with --gtest_also_run_disabled_tests): one decode row of a
// Qwen3.6-35B-A3B-like DeltaNet layer (16 key heads, 32 value heads, 128 wide, conv 4) over 64
// layers' states (128 MiB, past the L2), queued on a stream and replayed from a CUDA graph, against
// the state's bytes (read + write) at the device-to-device copy rate measured here.
TEST_F(CudaDeltaNet, DISABLED_DecodeStepTime) {
  const int64_t nk = 16, nv = 32, dk = 128, dv = 128, kernel = 4, layers = 64;
  const int64_t width = 2 * nk * dk + nv * dv, S = nv * dk * dv;
  const auto ok = [](cudaError_t e) { ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e); };
  float *state, *qkv, *beta, *alpha, *out, *window;
  ok(cudaMalloc(reinterpret_cast<void**>(&state), layers * S * sizeof(float)));
  ok(cudaMalloc(reinterpret_cast<void**>(&qkv), layers * width * sizeof(float)));
  ok(cudaMalloc(reinterpret_cast<void**>(&beta), layers * nv * sizeof(float)));
  ok(cudaMalloc(reinterpret_cast<void**>(&alpha), layers * nv * sizeof(float)));
  ok(cudaMalloc(reinterpret_cast<void**>(&out), layers * nv * dv * sizeof(float)));
  ok(cudaMalloc(reinterpret_cast<void**>(&window), layers * (kernel - 1) * width * sizeof(float)));
  const std::vector<float> s0 = randn(S, 0.1f), q0 = randn(width), g0 = randn(nv);
  const std::vector<float> w0 = randn((kernel - 1) * width);
  for (int64_t l = 0; l < layers; ++l) {
    ok(cudaMemcpy(state + l * S, s0.data(), S * sizeof(float), cudaMemcpyHostToDevice));
    ok(cudaMemcpy(qkv + l * width, q0.data(), width * sizeof(float), cudaMemcpyHostToDevice));
    ok(cudaMemcpy(beta + l * nv, g0.data(), nv * sizeof(float), cudaMemcpyHostToDevice));
    ok(cudaMemcpy(alpha + l * nv, g0.data(), nv * sizeof(float), cudaMemcpyHostToDevice));
    ok(cudaMemcpy(window + l * (kernel - 1) * width, w0.data(), w0.size() * sizeof(float),
                  cudaMemcpyHostToDevice));
  }
  const float* taps = upload(randn(width * kernel, 0.5f));
  DeltaRuleArgs args{nk, nv, dk, dv, false, upload(uniform(nv, -1.5f, -0.05f)), upload(randn(nv))};
  cudaStream_t st;
  ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  ok(cudaEventCreate(&e0));
  ok(cudaEventCreate(&e1));
  // The copy rate: 1 GiB device to device, best of 5.
  const size_t copy_bytes = size_t{1} << 30;
  void *ca, *cb;
  ok(cudaMalloc(&ca, copy_bytes));
  ok(cudaMalloc(&cb, copy_bytes));
  ok(cudaMemsetAsync(ca, 0, copy_bytes, st));
  float best_copy = 1e30f;
  for (int i = 0; i < 6; ++i) {
    ok(cudaEventRecord(e0, st));
    ok(cudaMemcpyAsync(cb, ca, copy_bytes, cudaMemcpyDeviceToDevice, st));
    ok(cudaEventRecord(e1, st));
    ok(cudaEventSynchronize(e1));
    float ms;
    ok(cudaEventElapsedTime(&ms, e0, e1));
    if (i > 0) best_copy = std::min(best_copy, ms);
  }
  const double copy_rate = 2.0 * copy_bytes / (best_copy * 1e-3);  // bytes read + written a second
  ok(cudaFree(ca));
  ok(cudaFree(cb));
  const double state_bytes = 2.0 * S * sizeof(float);
  std::printf("copy rate %.0f GB/s; state r+w %.2f MB a layer -> bound %.3f us a layer\n",
              copy_rate / 1e9, state_bytes / 1e6, state_bytes / copy_rate * 1e6);
  for (const bool with_conv : {false, true}) {
    auto step = [&] {
      for (int64_t l = 0; l < layers; ++l) {
        if (with_conv)
          cuda::launch_conv_silu(qkv + l * width, 1, width, taps, kernel,
                                 window + l * (kernel - 1) * width, st);
        cuda::launch_delta_rule(qkv + l * width, beta + l * nv, alpha + l * nv, 1, args,
                                state + l * S, out + l * nv * dv, st);
      }
    };
    const int reps = 20;
    step();
    ok(cudaStreamSynchronize(st));
    float best_stream = 1e30f;
    for (int r = 0; r < reps; ++r) {
      ok(cudaEventRecord(e0, st));
      step();
      ok(cudaEventRecord(e1, st));
      ok(cudaEventSynchronize(e1));
      float ms;
      ok(cudaEventElapsedTime(&ms, e0, e1));
      best_stream = std::min(best_stream, ms);
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ok(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    step();
    ok(cudaStreamEndCapture(st, &graph));
    ok(cudaGraphInstantiate(&exec, graph, 0));
    ok(cudaGraphLaunch(exec, st));
    ok(cudaStreamSynchronize(st));
    float best_graph = 1e30f, sum_graph = 0.0f;
    for (int r = 0; r < reps; ++r) {
      ok(cudaEventRecord(e0, st));
      ok(cudaGraphLaunch(exec, st));
      ok(cudaEventRecord(e1, st));
      ok(cudaEventSynchronize(e1));
      float ms;
      ok(cudaEventElapsedTime(&ms, e0, e1));
      best_graph = std::min(best_graph, ms);
      sum_graph += ms;
    }
    const double us_stream = best_stream * 1e3 / layers, us_graph = best_graph * 1e3 / layers;
    const double bound_us = state_bytes / copy_rate * 1e6;
    std::printf(
        "%s: a layer %.3f us queued (%.1f %% of bound), %.3f us from a graph (best; mean %.3f; "
        "%.1f %% of bound)\n",
        with_conv ? "conv_silu + delta_rule" : "delta_rule", us_stream, 100 * bound_us / us_stream,
        us_graph, sum_graph * 1e3 / reps / layers, 100 * bound_us / us_graph);
    ok(cudaGraphExecDestroy(exec));
    ok(cudaGraphDestroy(graph));
  }
  ok(cudaEventDestroy(e0));
  ok(cudaEventDestroy(e1));
  ok(cudaStreamDestroy(st));
  for (float* p : {state, qkv, beta, alpha, out, window}) ok(cudaFree(p));
}

}  // namespace
}  // namespace ts

#else

TEST(CudaDeltaNet, SkippedWithoutCudaBuild) {
  GTEST_SKIP() << "built without CUDA";
}

#endif
