#include "runtime/session.h"

#include <algorithm>
#include <map>

#include "core/checked.h"
#include "core/error.h"
#include "moe/router.h"

namespace ts {

Session::Session(Engine& engine) : engine_(engine), b_(engine.backend()), c_(engine.cfg()) {
  const EngineOptions& o = engine.options();
  ctx_ = o.ctx;
  batch_ = o.prefill_batch;
  const int64_t kv_width = c_.n_head_kv * c_.head_dim;
  const uint64_t row = row_bytes(o.kv_type, static_cast<uint64_t>(kv_width), "KV cache row");
  const uint64_t layer_bytes = checked_mul(row, static_cast<uint64_t>(ctx_), "KV cache");
  kv_.resize(static_cast<size_t>(c_.n_layer));
  for (KvView& kv : kv_) {
    kv = KvView{o.kv_type, ctx_, kv_width, static_cast<size_t>(row), b_.alloc(layer_bytes), b_.alloc(layer_bytes)};
    buffers_.push_back(kv.k);
    buffers_.push_back(kv.v);
    kv_bytes_ += 2 * layer_bytes;
  }
  const size_t B = static_cast<size_t>(batch_);
  const size_t d = static_cast<size_t>(c_.n_embd);
  const size_t qw = static_cast<size_t>(c_.n_head * c_.head_dim), kvw = static_cast<size_t>(kv_width);
  const size_t ff = static_cast<size_t>(std::max(c_.n_ff, c_.n_ff_expert));
  x_ = scratch(B * d);
  h_ = scratch(B * d);
  o_ = scratch(B * d);
  rows_ = scratch(B * d);
  q_ = scratch(B * qw);
  att_ = scratch(B * qw);
  k_ = scratch(B * kvw);
  v_ = scratch(B * kvw);
  ff_gate_ = scratch(B * ff);
  ff_up_ = scratch(B * ff);
  ff_act_ = scratch(B * ff);
  ff_out_ = scratch(B * d);
  if (c_.is_moe()) router_ = scratch(B * static_cast<size_t>(c_.n_expert));
  logits_ = scratch(B * static_cast<size_t>(c_.n_vocab));
  pos_.resize(B);
}

Session::~Session() {
  for (void* p : buffers_) b_.free(p);
}

float* Session::scratch(size_t floats) {
  void* p = b_.alloc(floats * sizeof(float));
  buffers_.push_back(p);
  return static_cast<float*>(p);
}

void Session::truncate(int64_t n) {
  if (n < 0 || n > n_past_) fail(ErrorKind::Input, "cannot truncate a session of " + std::to_string(n_past_) + " tokens to " + std::to_string(n));
  n_past_ = n;
}

void Session::feed(const int32_t* tokens, int64_t n, float* logits, bool all_rows) {
  if (n <= 0) fail(ErrorKind::Input, "nothing to feed: the token list is empty");
  if (n_past_ + n > ctx_)
    fail(ErrorKind::Input, std::to_string(n_past_ + n) + " tokens exceed the context of " + std::to_string(ctx_) +
                               " (raise -c)");
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= c_.n_vocab)
      fail(ErrorKind::Input, "token id " + std::to_string(tokens[i]) + " is outside the vocabulary of " +
                                 std::to_string(c_.n_vocab));
  for (int64_t start = 0; start < n; start += batch_) {
    const int64_t M = std::min(batch_, n - start);
    const bool last = start + M == n;
    float* out = all_rows ? logits + start * c_.n_vocab : (last ? logits : nullptr);
    forward_batch(tokens + start, M, out, all_rows);
  }
}

void Session::forward_batch(const int32_t* ids, int64_t M, float* logits, bool all_rows) {
  const int64_t d = c_.n_embd;
  for (int64_t m = 0; m < M; ++m) pos_[static_cast<size_t>(m)] = static_cast<int32_t>(n_past_ + m);
  b_.embed(engine_.token_embd(), ids, M, c_.embed_scale, x_);
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
    attention_block(l, M);
    if (c_.sandwich_norms) b_.rms_norm(o_, L.attn_post_norm, M, d, c_.rms_eps, c_.norm_plus_one, o_);
    b_.add(x_, o_, M * d);
    b_.rms_norm(x_, L.ffn_norm, M, d, c_.rms_eps, c_.norm_plus_one, h_);
    if (L.moe) {
      ffn_moe(l, M);
    } else {
      ffn_dense(l, M);
    }
    if (c_.sandwich_norms) b_.rms_norm(o_, L.ffn_post_norm, M, d, c_.rms_eps, c_.norm_plus_one, o_);
    b_.add(x_, o_, M * d);
  }
  n_past_ += M;
  if (logits == nullptr) return;
  // The head runs only on the rows whose logits are wanted.
  const int64_t rows = all_rows ? M : 1;
  const float* src = all_rows ? x_ : x_ + (M - 1) * d;
  b_.rms_norm(src, engine_.output_norm(), rows, d, c_.rms_eps, c_.norm_plus_one, h_);
  b_.matmul(engine_.output(), h_, rows, logits_);
  if (c_.final_softcap > 0) b_.softcap(logits_, rows * c_.n_vocab, c_.final_softcap);
  b_.to_host(logits, logits_, static_cast<size_t>(rows * c_.n_vocab) * sizeof(float));
}

void Session::attention_block(int64_t l, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t d = c_.n_embd, qw = c_.n_head * c_.head_dim, kvw = c_.n_head_kv * c_.head_dim;
  b_.rms_norm(x_, L.attn_norm, M, d, c_.rms_eps, c_.norm_plus_one, h_);
  b_.matmul(L.wq, h_, M, q_);
  b_.matmul(L.wk, h_, M, k_);
  b_.matmul(L.wv, h_, M, v_);
  if (c_.qkv_bias) {
    b_.add_bias(q_, L.bq, M, qw);
    b_.add_bias(k_, L.bk, M, kvw);
    b_.add_bias(v_, L.bv, M, kvw);
  }
  if (c_.qk_norm == QkNorm::WholeProjection) {
    b_.rms_norm(q_, L.q_norm, M, qw, c_.rms_eps, c_.norm_plus_one, q_);
    b_.rms_norm(k_, L.k_norm, M, kvw, c_.rms_eps, c_.norm_plus_one, k_);
  } else if (c_.qk_norm == QkNorm::PerHead) {
    b_.rms_norm_heads(q_, L.q_norm, M, c_.n_head, c_.head_dim, c_.rms_eps, c_.norm_plus_one);
    b_.rms_norm_heads(k_, L.k_norm, M, c_.n_head_kv, c_.head_dim, c_.rms_eps, c_.norm_plus_one);
  }
  b_.rope(q_, M, c_.n_head, pos_.data(), L.rope);
  b_.rope(k_, M, c_.n_head_kv, pos_.data(), L.rope);
  b_.kv_store(kv_[static_cast<size_t>(l)], k_, v_, M, pos_.data());
  b_.attention(q_, kv_[static_cast<size_t>(l)], M, pos_.data(), L.attn, att_);
  b_.matmul(L.wo, att_, M, o_);
}

void Session::ffn_dense(int64_t l, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t ff = c_.n_ff;
  b_.matmul(L.ffn_gate, h_, M, ff_gate_);
  b_.matmul(L.ffn_up, h_, M, ff_up_);
  if (c_.ffn_act == FfnActivation::SiLU) {
    b_.swiglu(ff_gate_, ff_up_, M * ff, ff_act_);
  } else {
    b_.geglu_tanh(ff_gate_, ff_up_, M * ff, ff_act_);
  }
  b_.matmul(L.ffn_down, ff_act_, M, o_);
}

void Session::ffn_moe(int64_t l, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t d = c_.n_embd, E = c_.n_expert, k = c_.n_expert_used, ff = c_.n_ff_expert;
  b_.matmul(L.router, h_, M, router_);
  router_host_.resize(static_cast<size_t>(M * E));
  b_.to_host(router_host_.data(), router_, router_host_.size() * sizeof(float));
  const RouterArgs ra{c_.router, E, k, c_.norm_topk_prob, L.router_bias.empty() ? nullptr : L.router_bias.data()};
  // rows routed to each expert, in ascending expert order (std::map): every row then sums its
  // experts in the same order whatever the slot count, which keeps streaming bit-identical.
  std::map<int32_t, std::pair<std::vector<int32_t>, std::vector<float>>> routed;
  std::vector<int32_t> ids(static_cast<size_t>(k));
  std::vector<float> w(static_cast<size_t>(k));
  for (int64_t m = 0; m < M; ++m) {
    route_token(router_host_.data() + m * E, ra, ids.data(), w.data());
    for (int64_t i = 0; i < k; ++i) {
      auto& r = routed[ids[static_cast<size_t>(i)]];
      r.first.push_back(static_cast<int32_t>(m));
      r.second.push_back(w[static_cast<size_t>(i)]);
    }
  }
  b_.zero(o_, M * d);
  std::vector<int32_t> experts;
  for (const auto& [e, r] : routed) experts.push_back(e);
  ExpertStore& store = engine_.experts();
  const int64_t wave = store.slots_per_layer();
  std::vector<const ExpertWeights*> weights(static_cast<size_t>(wave));
  // A micro-batch may route to more experts than there are slots: process them in waves.
  for (size_t w0 = 0; w0 < experts.size(); w0 += static_cast<size_t>(wave)) {
    const int64_t n = std::min<int64_t>(wave, static_cast<int64_t>(experts.size() - w0));
    store.acquire(l, experts.data() + w0, n, weights.data());
    for (int64_t i = 0; i < n; ++i) {
      const ExpertWeights& ew = *weights[static_cast<size_t>(i)];
      const auto& [rows, scale] = routed[experts[w0 + static_cast<size_t>(i)]];
      const int64_t R = static_cast<int64_t>(rows.size());
      b_.gather_rows(h_, rows.data(), R, d, rows_);
      b_.matmul(ew.gate, rows_, R, ff_gate_);
      b_.matmul(ew.up, rows_, R, ff_up_);
      b_.swiglu(ff_gate_, ff_up_, R * ff, ff_act_);
      b_.matmul(ew.down, ff_act_, R, ff_out_);
      b_.scatter_add_rows(o_, ff_out_, rows.data(), scale.data(), R, d);
    }
  }
}

}  // namespace ts
