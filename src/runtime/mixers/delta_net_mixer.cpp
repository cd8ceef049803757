#include "runtime/mixers/delta_net_mixer.h"

namespace ts {

int64_t DeltaNetMixer::row_floats(const DeltaNetConfig& d) {
  return d.conv_channels() + 2 * d.value_dim() + 2 * d.n_v_heads;
}

void DeltaNetMixer::run(int64_t l, const PassRows& rows, const float* h, float* out) {
  const int64_t M = rows.M;
  const DeltaNetWeights& W = engine_.layers()[static_cast<size_t>(l)].delta;
  const DeltaNetConfig& d = c_.delta;
  const int64_t C = d.conv_channels(), nv = d.n_v_heads, vd = d.value_dim();
  b_.matmul(W.qkv, h, M, qkv_);
  b_.matmul(W.z, h, M, z_);
  b_.matmul(W.beta, h, M, beta_);
  b_.matmul(W.alpha, h, M, alpha_);
  const DeltaRuleArgs args{d.n_k_heads,     d.n_v_heads, d.k_head_dim, d.v_head_dim,
                           d.v_heads_tiled, W.a,         W.dt_bias};
  // The convolution and the recurrence run through each sequence's rows in order.
  int64_t row = 0;
  for (const SeqChunk& ch : rows.chunks) {
    const DeltaStateView& st = ch.kv->delta(l);
    b_.conv_silu(qkv_ + row * C, ch.n, C, W.conv, d.conv_kernel, st.window);
    b_.delta_rule(qkv_ + row * C, beta_ + row * nv, alpha_ + row * nv, ch.n, args, st.state,
                  core_ + row * vd);
    row += ch.n;
  }
  // The gated norm: each value head's output RMS-normed (plain weights), times silu(z).
  b_.rms_norm_heads(core_, W.norm, M, nv, d.v_head_dim, c_.rms_eps, false);
  b_.glu(Glu::SiLU, z_, core_, M, vd, vd, core_);
  b_.matmul(W.out, core_, M, out);
}

}  // namespace ts
