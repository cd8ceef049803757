#include "runtime/mixers/mla_mixer.h"

namespace ts {

int64_t MlaMixer::row_floats(const ArchConfig& c) {
  const MlaConfig& m = c.mla;
  const int64_t H = c.n_head;
  return m.q_lora_rank + H * m.qk_head_dim() + m.row_width() + m.kv_lora_rank +
         2 * H * m.row_width() + H * m.v_head_dim;
}

void MlaMixer::run(int64_t l, const PassRows& rows, const float* h, float* out) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const MlaWeights& W = L.mla;
  const MlaConfig& m = c_.mla;
  const int64_t M = rows.M, H = c_.n_head, R = m.qk_rope_head_dim, K = m.kv_lora_rank;
  const int64_t nope = m.qk_nope_head_dim, w = m.row_width();
  const float* q_in = h;
  if (W.q_a.data != nullptr) {
    b_.matmul(W.q_a, h, M, q_lat_);
    b_.rms_norm(q_lat_, W.q_a_norm, M, m.q_lora_rank, c_.rms_eps, false, q_lat_);
    q_in = q_lat_;
  }
  b_.matmul(W.q_nope, q_in, M, q_nope_);
  b_.matmul(W.q_pe, q_in, M, q_pe_);
  // The cache rows: [k_pe | latent], the latent normed (through a contiguous copy) and k_pe
  // rotated.
  b_.matmul(W.kv_a, h, M, kv_);
  b_.copy_rows(latent_, K, kv_ + R, w, M, K);
  b_.rms_norm(latent_, W.kv_norm, M, K, c_.rms_eps, false, latent_);
  b_.copy_rows(kv_ + R, w, latent_, K, M, K);
  b_.rope(kv_, M, 1, rows.pos, L.rope);
  // The queries: per head [q_pe | k_b^T q_nope], q_pe rotated in place.
  b_.copy_rows(query_, w, q_pe_, R, M * H, R);
  b_.matmul_heads(W.k_b, H, q_nope_, H * nope, nope, M, query_ + R, H * w, w);
  b_.rope(query_, M, H, rows.pos, L.rope);
  // Each sequence stores its rows and attends over its own.
  int64_t row = 0;
  for (const SeqChunk& ch : rows.chunks) {
    const KvView& kv = ch.kv->layer(l);
    const int32_t* pos = rows.pos + row;
    b_.kv_store(kv, kv_ + row * w, kv_ + row * w, ch.n, pos);
    b_.attention(query_ + row * H * w, kv, ch.n, pos, L.attn, att_ + row * H * w);
    row += ch.n;
  }
  // The latent part of each head's output, through v_b, then the output projection.
  b_.matmul_heads(W.v_b, H, att_ + R, H * w, w, M, values_, H * m.v_head_dim, m.v_head_dim);
  b_.matmul(L.wo, values_, M, out);
}

}  // namespace ts
