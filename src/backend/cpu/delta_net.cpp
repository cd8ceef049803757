#include "backend/cpu/delta_net.h"

#include <cmath>
#include <vector>

namespace ts::cpu {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// PyTorch's softplus with its default threshold: x itself above 20.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x * rsqrt(sum(x^2) + 1e-6), as the reference's l2norm (flash-linear-attention's epsilon).
void l2_normalise(const float* x, int64_t n, float scale, float* out) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + 1e-6f);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
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
  const int64_t dk = a.k_head_dim, dv = a.v_head_dim, nv = a.n_v_heads;
  const int64_t key_dim = a.n_k_heads * dk, width = 2 * key_dim + nv * dv;
  const int64_t per_key = nv / a.n_k_heads;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  std::vector<float> q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk)),
      kv_mem(static_cast<size_t>(dv));
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t kh = a.v_heads_tiled ? h % a.n_k_heads : h / per_key;
    float* S = state + h * dk * dv;  // [dk][dv]
    for (int64_t t = 0; t < M; ++t) {
      const float* row = qkv + t * width;
      l2_normalise(row + kh * dk, dk, q_scale, q.data());
      l2_normalise(row + key_dim + kh * dk, dk, 1.0f, k.data());
      const float* v = row + 2 * key_dim + h * dv;
      const float b = sigmoid(beta[t * nv + h]);
      const float decay = std::exp(a.a[h] * softplus(alpha[t * nv + h] + a.dt_bias[h]));
      // S *= exp(g), then what the decayed state already predicts for k.
      for (int64_t j = 0; j < dv; ++j) kv_mem[static_cast<size_t>(j)] = 0;
      for (int64_t i = 0; i < dk; ++i) {
        float* s = S + i * dv;
        const float ki = k[static_cast<size_t>(i)];
        for (int64_t j = 0; j < dv; ++j) {
          s[j] *= decay;
          kv_mem[static_cast<size_t>(j)] += s[j] * ki;
        }
      }
      // The delta rule's correction, written into the state along k; then the read along q.
      for (int64_t j = 0; j < dv; ++j)
        kv_mem[static_cast<size_t>(j)] = (v[j] - kv_mem[static_cast<size_t>(j)]) * b;
      float* o = out + t * nv * dv + h * dv;
      for (int64_t j = 0; j < dv; ++j) o[j] = 0;
      for (int64_t i = 0; i < dk; ++i) {
        float* s = S + i * dv;
        const float ki = k[static_cast<size_t>(i)], qi = q[static_cast<size_t>(i)];
        for (int64_t j = 0; j < dv; ++j) {
          s[j] += ki * kv_mem[static_cast<size_t>(j)];
          o[j] += s[j] * qi;
        }
      }
    }
  }
}

}  // namespace ts::cpu
