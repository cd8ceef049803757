#include "runtime/mixers/attention_mixer.h"

#include <algorithm>

namespace ts {

void AttentionMixer::prepare_step(const std::vector<SeqChunk>& chunks) {
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    if (engine_.layers()[static_cast<size_t>(l)].mixer != MixerKind::Attention) continue;
    for (size_t s = 0; s < chunks.size(); ++s)
      step_kv_[static_cast<size_t>(l * kDecodeStepRows) + s] = chunks[s].kv->layer(l);
  }
}

void AttentionMixer::run(int64_t l, const PassRows& rows, const float* h, float* out) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t M = rows.M;
  const int64_t hd = L.attn.head_dim, n_kv = L.attn.n_head_kv;
  const int64_t qw = c_.n_head * hd, kvw = n_kv * hd;
  float *q = q_, *k = k_, *v = v_, *gate = gate_;
  // One token through stacked q/k/v weights: one matmul, its row holding q, k and v side by side
  // (and the output gate after them). Rows of a micro-batch would interleave that way, so they take
  // the views instead. A v norm (Gemma 4) is applied to the v view below, before the store.
  if (M == 1 && L.wqkv.data != nullptr) {
    b_.matmul(L.wqkv, h, 1, q_);
    k = q + qw;
    v = k + kvw;
    gate = v + kvw;
  } else {
    b_.matmul(L.wq, h, M, q);
    if (L.wk.data == nullptr) {
      // KV sharing: the rows this layer reads are an earlier layer's, already stored.
      if (L.q_norm != nullptr)
        b_.rms_norm_heads(q, L.q_norm, M, c_.n_head, hd, c_.rms_eps, c_.norm_plus_one);
      b_.rope(q, M, c_.n_head, rows.rope_pos, L.rope);
      store_and_attend(l, rows, q, nullptr, nullptr);
      b_.matmul(L.wo, att_, M, out);
      return;
    }
    b_.matmul(L.wk, h, M, k);
    if (L.wv.data != nullptr) {
      b_.matmul(L.wv, h, M, v);
    } else {
      b_.copy(v, k, static_cast<size_t>(M * kvw) * sizeof(float));  // k = v: before k's norm
    }
    if (c_.attn_output_gate) b_.matmul(L.wgate, h, M, gate);
  }
  if (L.v_norm != nullptr) b_.rms_norm_heads(v, L.v_norm, M, n_kv, hd, c_.rms_eps, false);
  if (c_.qkv_bias) {
    b_.add_bias(q, L.bq, M, qw);
    b_.add_bias(k, L.bk, M, kvw);
    b_.add_bias(v, L.bv, M, kvw);
  }
  // Adjacent: k right after q and v right after k (layers of different widths share buffers
  // sized for the widest, so the views line up only for some). M-RoPE rotates by other positions
  // than the cache row: the separate ops below.
  const bool qkv_adjacent = M == 1 && k == q + qw && v == k + kvw && rows.rope_pos == rows.pos;
  if (c_.qk_norm == QkNorm::WholeProjection) {
    b_.rms_norm(q, L.q_norm, M, qw, c_.rms_eps, c_.norm_plus_one, q);
    b_.rms_norm(k, L.k_norm, M, kvw, c_.rms_eps, c_.norm_plus_one, k);
  } else if (c_.qk_norm == QkNorm::PerHead && !qkv_adjacent) {
    b_.rms_norm_heads(q, L.q_norm, M, c_.n_head, hd, c_.rms_eps, c_.norm_plus_one);
    b_.rms_norm_heads(k, L.k_norm, M, n_kv, hd, c_.rms_eps, c_.norm_plus_one);
  }
  if (qkv_adjacent) {
    // One token through the stacked weights has its k and v heads right after its q heads: one op
    // norms them per head (where not normed above), rotates q and k, and stores k and v.
    const bool per_head = c_.qk_norm == QkNorm::PerHead;
    const auto one = std::find_if(rows.chunks.begin(), rows.chunks.end(),
                                  [](const SeqChunk& ch) { return ch.n == 1; });
    const KvView& kv = one->kv->layer(l);
    b_.rope_kv_store(q, per_head ? L.q_norm : nullptr, per_head ? L.k_norm : nullptr, c_.n_head,
                     n_kv, c_.rms_eps, c_.norm_plus_one, rows.pos, L.rope, kv);
    b_.attention(q, kv, 1, rows.pos, L.attn, att_);
  } else {
    b_.rope(q, M, c_.n_head, rows.rope_pos, L.rope);
    b_.rope(k, M, n_kv, rows.rope_pos, L.rope);
    store_and_attend(l, rows, q, k, v);
  }
  if (c_.attn_output_gate) b_.glu(Glu::Sigmoid, gate, att_, M, qw, qw, att_);
  b_.matmul(L.wo, att_, M, out);
  if (L.bo != nullptr) b_.add_bias(out, L.bo, M, c_.n_embd);
}

void AttentionMixer::store_and_attend(int64_t l, const PassRows& rows, const float* q,
                                      const float* k, const float* v) {
  const int64_t M = rows.M;
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t qw = c_.n_head * L.attn.head_dim, kvw = L.attn.n_head_kv * L.attn.head_dim;
  // Each sequence attends over its own cache: in a decode step of several, all in one op.
  if (rows.decode_step && M > 1) {
    const KvView* kv = step_kv_.data() + l * kDecodeStepRows;
    if (k != nullptr) b_.kv_store_each(kv, k, v, M, rows.pos);
    b_.attention_each(q, kv, M, rows.pos, L.attn, att_);
  } else {
    int64_t row = 0;
    for (const SeqChunk& ch : rows.chunks) {
      const KvView& kv = ch.kv->layer(l);
      const int32_t* pos = rows.pos + row;
      if (k != nullptr) b_.kv_store(kv, k + row * kvw, v + row * kvw, ch.n, pos);
      AttentionArgs a = L.attn;
      const bool both_ways = c_.image_attention == ImageAttention::AllLayers ||
                             (c_.image_attention == ImageAttention::SlidingLayers && a.window > 0);
      if (ch.in.span != nullptr && both_ways) {
        key_end_.resize(static_cast<size_t>(ch.n));
        for (int64_t i = 0; i < ch.n; ++i)
          key_end_[static_cast<size_t>(i)] = pos[i] + 1 + ch.in.span[i];
        a.key_end = key_end_.data();
      }
      b_.attention(q + row * qw, kv, ch.n, pos, a, att_ + row * qw);
      row += ch.n;
    }
  }
}

}  // namespace ts
