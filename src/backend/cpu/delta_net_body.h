// The gated delta rule of value heads [h0, h1) over M rows (Backend::delta_rule), as plain loops
// over the state that the compiler vectorises for the instruction set of the file that includes
// this (delta_net.cpp, delta_net_avx2.cpp, delta_net_avx512.cpp), inside its target region.
//
// Per row and head, with S the state [k_head_dim][v_head_dim] before the row:
//   a = S^T k, c = S^T q                      one pass reading S
//   delta = (v - exp(g) a) beta               what the decayed state does not yet predict for k
//   out = exp(g) c + delta (k . q)            = S_new^T q
//   S_new = exp(g) S + k delta^T              one pass reading and writing S
// the reference's S *= exp(g); S += k (v - S^T k)^T beta; out = S^T q with the decay factored
// out of the reads: three passes over S instead of four.
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace ts::cpu::TS_DELTA_NET_NS {
namespace {

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
// PyTorch's softplus with its default threshold: x itself above 20.
inline float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// x * rsqrt(sum(x^2) + 1e-6), as the reference's l2norm (flash-linear-attention's epsilon).
inline void l2_normalise(const float* __restrict x, int64_t n, float scale, float* __restrict out) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + 1e-6f);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
}

}  // namespace

inline void delta_rule_heads(const float* qkv, const float* beta, const float* alpha, int64_t M,
                             const DeltaRuleArgs& args, float* state, float* out, int64_t h0,
                             int64_t h1) {
  const int64_t dk = args.k_head_dim, dv = args.v_head_dim, nv = args.n_v_heads;
  const int64_t key_dim = args.n_k_heads * dk, width = 2 * key_dim + nv * dv;
  const int64_t per_key = nv / args.n_k_heads;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // q, k, then a, c and delta of one row: one allocation a call.
  std::vector<float> scratch(static_cast<size_t>(2 * dk + 3 * dv));
  float* __restrict q = scratch.data();
  float* __restrict k = q + dk;
  float* __restrict a = k + dk;
  float* __restrict c = a + dv;
  float* __restrict delta = c + dv;
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t kh = args.v_heads_tiled ? h % args.n_k_heads : h / per_key;
    float* __restrict S = state + h * dk * dv;
    for (int64_t t = 0; t < M; ++t) {
      const float* row = qkv + t * width;
      l2_normalise(row + kh * dk, dk, q_scale, q);
      l2_normalise(row + key_dim + kh * dk, dk, 1.0f, k);
      const float* __restrict v = row + 2 * key_dim + h * dv;
      const float b = sigmoid(beta[t * nv + h]);
      const float decay = std::exp(args.a[h] * softplus(alpha[t * nv + h] + args.dt_bias[h]));
      for (int64_t j = 0; j < dv; ++j) a[j] = c[j] = 0;
      float kq = 0;
      for (int64_t i = 0; i < dk; ++i) {
        const float* __restrict s = S + i * dv;
        const float ki = k[i], qi = q[i];
        kq += ki * qi;
        for (int64_t j = 0; j < dv; ++j) {
          a[j] += s[j] * ki;
          c[j] += s[j] * qi;
        }
      }
      float* __restrict o = out + t * nv * dv + h * dv;
      for (int64_t j = 0; j < dv; ++j) {
        delta[j] = (v[j] - decay * a[j]) * b;
        o[j] = decay * c[j] + delta[j] * kq;
      }
      for (int64_t i = 0; i < dk; ++i) {
        float* __restrict s = S + i * dv;
        const float ki = k[i];
        for (int64_t j = 0; j < dv; ++j) s[j] = decay * s[j] + ki * delta[j];
      }
    }
  }
}

}  // namespace ts::cpu::TS_DELTA_NET_NS
