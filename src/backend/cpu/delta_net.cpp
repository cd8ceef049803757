#include "backend/cpu/delta_net.h"

#include <cmath>
#include <vector>

#include "backend/cpu/matmul_kernels.h"

#define TS_DELTA_NET_NS scalar
#include "backend/cpu/delta_net_body.h"

namespace ts::cpu {
namespace {

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

}  // namespace

void conv_silu_channels(float* x, int64_t M, int64_t channels, const float* taps, int64_t kernel,
                        float* window, int64_t c0, int64_t c1) {
  const int64_t past = kernel - 1;
  std::vector<float> in(static_cast<size_t>(past + M));
  for (int64_t c = c0; c < c1; ++c) {
    // The channel's inputs in order: the window's, then this call's rows.
    for (int64_t j = 0; j < past; ++j) in[static_cast<size_t>(j)] = window[j * channels + c];
    for (int64_t t = 0; t < M; ++t) in[static_cast<size_t>(past + t)] = x[t * channels + c];
    const float* w = taps + c * kernel;
    for (int64_t t = 0; t < M; ++t) {
      float acc = 0;
      for (int64_t j = 0; j < kernel; ++j) acc += w[j] * in[static_cast<size_t>(t + j)];
      x[t * channels + c] = silu(acc);
    }
    for (int64_t j = 0; j < past; ++j) window[j * channels + c] = in[static_cast<size_t>(M + j)];
  }
}

void delta_rule_heads(const float* qkv, const float* beta, const float* alpha, int64_t M,
                      const DeltaRuleArgs& a, float* state, float* out, int64_t h0, int64_t h1) {
  switch (active_isa()) {
    case Isa::Avx512:
      return delta_rule_heads_avx512(qkv, beta, alpha, M, a, state, out, h0, h1);
    case Isa::Avx2:
      return delta_rule_heads_avx2(qkv, beta, alpha, M, a, state, out, h0, h1);
    case Isa::Scalar:
      return scalar::delta_rule_heads(qkv, beta, alpha, M, a, state, out, h0, h1);
  }
}

}  // namespace ts::cpu
