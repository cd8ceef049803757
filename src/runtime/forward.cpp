#include "runtime/forward.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "moe/router.h"
#include "runtime/delta_net_mixer.h"

namespace ts {
namespace {

// The rows [first, last) of a chunk whose logits are wanted, copied out or scored.
int64_t first_wanted(const SeqChunk& ch) {
  if (ch.logits != nullptr) return ch.all_rows ? 0 : ch.n - 1;
  return ch.targets != nullptr ? ch.score_from : ch.n;
}
int64_t last_wanted(const SeqChunk& ch) {
  return ch.logits != nullptr || ch.targets == nullptr ? ch.n : ch.score_to;
}

// The scoring fields of a chunk that wants rows scored, checked (targets are token ids of the
// caller's text).
void check_scoring(const SeqChunk& ch, int64_t n_vocab) {
  if (ch.logits != nullptr || ch.nll == nullptr || ch.score_from < 0 ||
      ch.score_from > ch.score_to || ch.score_to > ch.n)
    fail(ErrorKind::Runtime, "internal: a chunk of " + std::to_string(ch.n) + " rows scoring [" +
                                 std::to_string(ch.score_from) + ", " +
                                 std::to_string(ch.score_to) + ")");
  for (int64_t i = 0; i < ch.score_to - ch.score_from; ++i)
    if (ch.targets[i] < 0 || ch.targets[i] >= n_vocab)
      fail(ErrorKind::Input, "target token id " + std::to_string(ch.targets[i]) +
                                 " is outside the vocabulary of " + std::to_string(n_vocab));
}

}  // namespace

Forward::Forward(Engine& engine, int64_t max_rows, int64_t head_rows)
    : engine_(engine),
      b_(engine.backend()),
      c_(engine.cfg()),
      max_rows_(max_rows),
      head_rows_(head_rows) {
  const size_t B = static_cast<size_t>(max_rows_);
  const size_t d = static_cast<size_t>(c_.n_embd);
  const size_t qw = static_cast<size_t>(c_.n_head * c_.head_dim),
               kvw = static_cast<size_t>(c_.n_head_kv * c_.head_dim);
  const size_t k = c_.is_moe() ? static_cast<size_t>(c_.n_expert_used) : 0;
  // The gathered rows and the expert output hold all M * k routed rows of an MoE micro-batch: its
  // experts run over all of them at once; so do the FFN-wide buffers (ffn_row_floats).
  const size_t ffn_rows = B * std::max<size_t>(k, 1);
  const size_t ff = B * static_cast<size_t>(ffn_row_floats(c_));
  x_ = scratch(B * d);
  h_ = scratch(B * d);
  o_ = scratch(B * d);
  rows_ = scratch(ffn_rows * d);
  // q, k and v in one buffer: a stacked matmul writes a token's three side by side (and an output
  // gate after them: one row more of q width).
  const size_t gw = c_.attn_output_gate ? qw : 0;
  q_ = scratch(B * (qw + 2 * kvw) + gw);
  k_ = q_ + B * qw;
  v_ = k_ + B * kvw;
  att_ = scratch(B * qw);
  if (c_.attn_output_gate) gate_ = scratch(B * qw);
  if (c_.has_mixer(MixerKind::DeltaNet))
    delta_net_ = std::make_unique<DeltaNetMixer>(engine_, max_rows_,
                                                 [this](size_t floats) { return scratch(floats); });
  // Gate and up in one buffer: a stacked matmul writes each row as [gate | up].
  ff_gate_ = scratch(2 * ff);
  ff_up_ = ff_gate_ + ff;
  ff_act_ = scratch(ff);
  ff_out_ = scratch(ffn_rows * d);
  if (c_.is_moe()) {
    router_ = scratch(B * static_cast<size_t>(c_.n_expert));
    routing_ = scratch(B * 2 * k);
    experts_on_device_ = b_.indexes_experts_on_device();
    for (int64_t l = 0; l < c_.n_layer; ++l)
      if (engine_.layers()[static_cast<size_t>(l)].moe && engine_.experts().table(l) == nullptr)
        experts_on_device_ = false;
    predicted_ = scratch(2 * k);
    routed_ids_ = static_cast<int32_t*>(b_.alloc_host_pinned(2 * k * sizeof(int32_t)));
  }
  logits_ = scratch(static_cast<size_t>(std::min(max_rows_, head_rows_) * c_.n_vocab));
  ids_.resize(B);
  pos_.resize(B);
  // A recorded step re-reads the head's row list from where it was: it must never move.
  wanted_rows_.reserve(B);
  step_kv_.resize(static_cast<size_t>(c_.n_layer * kDecodeStepRows));
}

Forward::~Forward() {
  delta_net_.reset();
  for (void* p : buffers_) b_.free(p);
  b_.free_host_pinned(routed_ids_);
}

float* Forward::scratch(size_t floats) {
  void* p = b_.alloc(floats * sizeof(float));
  buffers_.push_back(p);
  return static_cast<float*>(p);
}

void Forward::run(const std::vector<SeqChunk>& chunks) {
  const int64_t vocab = engine_.token_embd().rows;
  int64_t M = 0;
  for (const SeqChunk& ch : chunks) {
    if (ch.kv->n_past() + ch.n > ch.kv->ctx())
      fail(ErrorKind::Input, std::to_string(ch.kv->n_past() + ch.n) +
                                 " tokens exceed the context of " + std::to_string(ch.kv->ctx()) +
                                 " (raise -c)");
    if (M + ch.n > max_rows_)
      fail(ErrorKind::Runtime, "internal: micro-batch larger than the forward's rows");
    if (ch.targets != nullptr) check_scoring(ch, c_.n_vocab);
    for (int64_t i = 0; i < ch.n; ++i, ++M) {
      if (ch.tokens[i] < 0 || ch.tokens[i] >= vocab)
        fail(ErrorKind::Input, "token id " + std::to_string(ch.tokens[i]) +
                                   " is outside the vocabulary of " + std::to_string(vocab));
      ids_[static_cast<size_t>(M)] = ch.tokens[i];
      pos_[static_cast<size_t>(M)] = static_cast<int32_t>(ch.kv->n_past() + i);
    }
  }
  if (M == 0) return;
  decode_step_ = M <= kDecodeStepRows;
  for (const SeqChunk& ch : chunks) decode_step_ = decode_step_ && ch.n == 1;
  if (decode_step_ && M > 1)
    for (int64_t l = 0; l < c_.n_layer; ++l)
      for (int64_t s = 0; s < M; ++s)
        step_kv_[static_cast<size_t>(l * kDecodeStepRows + s)] =
            chunks[static_cast<size_t>(s)].kv->layer(l);
  // The head runs only on the rows whose logits are wanted. Listed here, outside a recorded step,
  // whose ops a replay does not run again.
  wanted_rows_.clear();
  int64_t row = 0;
  for (const SeqChunk& ch : chunks) {
    for (int64_t i = first_wanted(ch); i < last_wanted(ch); ++i)
      wanted_rows_.push_back(static_cast<int32_t>(row + i));
    row += ch.n;
  }
  const auto wanted = static_cast<int64_t>(wanted_rows_.size());
  // A decode step (one token of each of a few sequences) queues the same ops every step, over
  // the same buffers and the same KV caches; only ids_, pos_ and wanted_rows_ change (checked
  // above, and kept where they are). The backend may record it once and replay it. Streamed
  // experts are known only once their layer's router has run: such a step (one sequence) is
  // recorded in pieces, each ending with one layer's routing queued back to the host, which then
  // makes that layer's experts present. MoE layers that group their rows on the host run eagerly.
  const bool same_every_step = decode_step_ && (!c_.is_moe() || experts_indexed(M));
  if (same_every_step) {
    std::vector<const void*> states(chunks.size());
    for (size_t s = 0; s < chunks.size(); ++s) states[s] = chunks[s].kv;
    for (int64_t from = -1;;) {
      const int64_t stop = next_streamed_layer(from);
      const StepKey key{this, states, (from + 1) * (max_rows_ + 1) + wanted};
      b_.run_recorded(key, [&] {
        layers(chunks, M, from, stop);
        if (stop == c_.n_layer) head(M);
      });
      if (stop == c_.n_layer) break;
      fetch_streamed_experts(stop);
      from = stop;
    }
  } else {
    layers(chunks, M, -1, c_.n_layer);
    head(M);
  }
  for (const SeqChunk& ch : chunks) ch.kv->advance(ch.n);
  // head() queued the logits of the first head_rows_ wanted rows (decode's one row inside its
  // recorded step, as before); the rest follow a chunk at a time through the same buffer, each
  // copied out before the next overwrites it (a device's to_host waits for the chunk).
  for (int64_t r0 = 0; r0 < wanted; r0 += head_rows_) {
    if (r0 > 0) head_logits(r0);
    copy_logits(chunks, r0);
  }
}

void Forward::layers(const std::vector<SeqChunk>& chunks, int64_t M, int64_t from, int64_t stop) {
  const int64_t d = c_.n_embd;
  if (from < 0) b_.embed(engine_.token_embd(), ids_.data(), M, c_.embed_scale, x_);
  // Each residual add is fused with the norm after it: the FFN's output joins x_ in the next
  // layer's attention norm, and the last layer's in the head's output norm.
  for (int64_t l = std::max<int64_t>(from, 0); l < c_.n_layer; ++l) {
    const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
    if (l != from) {
      if (l == 0) {
        b_.rms_norm(x_, L.attn_norm, M, d, c_.rms_eps, c_.norm_plus_one, h_);
      } else {
        add_ffn_out_norm(L.attn_norm, M);
      }
      mix(l, chunks, M);
      if (c_.sandwich_norms)
        b_.rms_norm(o_, L.attn_post_norm, M, d, c_.rms_eps, c_.norm_plus_one, o_);
      b_.add_rms_norm(x_, o_, L.ffn_norm, M, d, c_.rms_eps, c_.norm_plus_one, h_);
      if (L.moe) route(l, M, routing_);
      if (l == stop) {
        // Ids and weights stay where route() put them; the host needs the ids alone.
        const size_t ids_bytes = static_cast<size_t>(c_.n_expert_used) * sizeof(int32_t);
        b_.to_host_async(routed_ids_, routing_, ids_bytes);
        if (predicts_next(l)) {
          // The next MoE layer's router over this layer's FFN input: the residual stream changes
          // little between adjacent layers, so its picks are mostly the ones that layer will make.
          route(next_streamed_layer(l), 1, predicted_);
          b_.to_host_async(routed_ids_ + c_.n_expert_used, predicted_, ids_bytes);
        }
        return;
      }
    }
    ffn_out_routed_ = false;
    if (L.moe) {
      ffn_moe(l, M);
    } else {
      ffn_dense(l, M);
    }
    if (c_.sandwich_norms) b_.rms_norm(o_, L.ffn_post_norm, M, d, c_.rms_eps, c_.norm_plus_one, o_);
  }
}

int64_t Forward::next_streamed_layer(int64_t from) const {
  // Experts paged on the device need no host between layers: the step is one piece.
  if (!engine_.experts().streaming() || engine_.experts().pages_on_device()) return c_.n_layer;
  int64_t l = from + 1;
  while (l < c_.n_layer && !engine_.layers()[static_cast<size_t>(l)].moe) ++l;
  return l;
}

void Forward::fetch_streamed_experts(int64_t l) {
  b_.synchronize();
  const int64_t k = c_.n_expert_used;
  // The ids come from a kernel: out of range, they would index past the layer's tables.
  const auto read_ids = [&](const int32_t* ids) {
    for (int64_t i = 0; i < k; ++i)
      if (ids[i] < 0 || ids[i] >= c_.n_expert)
        fail(ErrorKind::Runtime, "internal: layer " + std::to_string(l) + " routed to expert " +
                                     std::to_string(ids[i]) + " of " + std::to_string(c_.n_expert));
    return std::vector<int32_t>(ids, ids + k);
  };
  std::vector<int32_t> experts = read_ids(routed_ids_);
  // In ascending order, as the host path acquires them: the same slots and statistics.
  std::sort(experts.begin(), experts.end());
  experts.erase(std::unique(experts.begin(), experts.end()), experts.end());
  ExpertStore& store = engine_.experts();
  const auto n = static_cast<int64_t>(experts.size());
  store.acquire(l, experts.data(), n);
  for (int64_t i = 0; i < n; ++i) store.ready(l, i);
  store.publish_table(l);
  // Their copies queue behind this layer's, and run under its compute and the next attention.
  if (predicts_next(l)) {
    const std::vector<int32_t> guess = read_ids(routed_ids_ + k);
    store.prefetch(next_streamed_layer(l), guess.data(), k);
  }
}

bool Forward::predicts_next(int64_t l) const {
  return engine_.experts().prefetching() && next_streamed_layer(l) < c_.n_layer;
}

void Forward::head(int64_t M) {
  if (wanted_rows_.empty()) return;
  const int64_t d = c_.n_embd, R = static_cast<int64_t>(wanted_rows_.size());
  // x_ still lacks the last layer's FFN output (see layers()).
  if (R < M) {
    sum_routed_rows(M);
    b_.add(x_, o_, M * d);
    b_.gather_rows(x_, wanted_rows_.data(), R, d, rows_);
    b_.rms_norm(rows_, engine_.output_norm(), R, d, c_.rms_eps, c_.norm_plus_one, h_);
  } else {
    add_ffn_out_norm(engine_.output_norm(), M);
  }
  head_logits(0);
}

void Forward::add_ffn_out_norm(const float* w, int64_t M) {
  const int64_t d = c_.n_embd, k = c_.n_expert_used;
  if (ffn_out_routed_) {
    const auto* ids = reinterpret_cast<const int32_t*>(routing_);
    b_.combine_add_rms_norm(ff_out_, ids, routing_ + M * k, k, x_, w, M, d, c_.rms_eps,
                            c_.norm_plus_one, o_, h_);
    ffn_out_routed_ = false;
  } else {
    b_.add_rms_norm(x_, o_, w, M, d, c_.rms_eps, c_.norm_plus_one, h_);
  }
}

void Forward::sum_routed_rows(int64_t M) {
  if (!ffn_out_routed_) return;
  const int64_t k = c_.n_expert_used;
  const auto* ids = reinterpret_cast<const int32_t*>(routing_);
  b_.combine_experts(ff_out_, ids, routing_ + M * k, M, k, c_.n_embd, o_);
  ffn_out_routed_ = false;
}

void Forward::head_logits(int64_t r0) {
  const int64_t V = c_.n_vocab;
  const int64_t n = std::min(head_rows_, static_cast<int64_t>(wanted_rows_.size()) - r0);
  b_.matmul(engine_.output(), h_ + r0 * c_.n_embd, n, logits_);
  if (c_.final_softcap > 0) b_.softcap(logits_, n * V, c_.final_softcap);
}

void Forward::copy_logits(const std::vector<SeqChunk>& chunks, int64_t r0) {
  const int64_t V = c_.n_vocab;
  const int64_t r1 = std::min(r0 + head_rows_, static_cast<int64_t>(wanted_rows_.size()));
  // Each chunk's wanted rows are a run [r, r + rows) of wanted_rows_; the part of it in
  // [r0, r1) is contiguous on both sides, so it takes one copy (or one scoring).
  int64_t r = 0;
  for (const SeqChunk& ch : chunks) {
    const int64_t rows = last_wanted(ch) - first_wanted(ch);
    const int64_t lo = std::max(r, r0), hi = std::min(r + rows, r1);
    if (lo < hi && ch.logits != nullptr)
      b_.to_host(ch.logits + (lo - r) * V, logits_ + (lo - r0) * V,
                 static_cast<size_t>((hi - lo) * V) * sizeof(float));
    else if (lo < hi)
      b_.nll_rows(logits_ + (lo - r0) * V, hi - lo, V, ch.targets + (lo - r), ch.nll + (lo - r));
    r += rows;
  }
}

void Forward::mix(int64_t l, const std::vector<SeqChunk>& chunks, int64_t M) {
  switch (engine_.layers()[static_cast<size_t>(l)].mixer) {
    case MixerKind::Attention:
      return attention_block(l, chunks, M);
    case MixerKind::DeltaNet:
      return delta_net_->run(l, chunks, M, h_, o_);
  }
}

void Forward::attention_block(int64_t l, const std::vector<SeqChunk>& chunks, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t qw = c_.n_head * c_.head_dim, kvw = c_.n_head_kv * c_.head_dim;
  float *q = q_, *k = k_, *v = v_, *gate = gate_;
  // One token through stacked q/k/v weights: one matmul, its row holding q, k and v side by side
  // (and the output gate after them). Rows of a micro-batch would interleave that way, so they take
  // the views instead.
  if (M == 1 && L.wqkv.data != nullptr) {
    b_.matmul(L.wqkv, h_, 1, q_);
    k = q + qw;
    v = k + kvw;
    gate = v + kvw;
  } else {
    b_.matmul(L.wq, h_, M, q);
    b_.matmul(L.wk, h_, M, k);
    b_.matmul(L.wv, h_, M, v);
    if (c_.attn_output_gate) b_.matmul(L.wgate, h_, M, gate);
  }
  if (c_.qkv_bias) {
    b_.add_bias(q, L.bq, M, qw);
    b_.add_bias(k, L.bk, M, kvw);
    b_.add_bias(v, L.bv, M, kvw);
  }
  const bool qkv_adjacent = M == 1 && k == q + qw;
  if (c_.qk_norm == QkNorm::WholeProjection) {
    b_.rms_norm(q, L.q_norm, M, qw, c_.rms_eps, c_.norm_plus_one, q);
    b_.rms_norm(k, L.k_norm, M, kvw, c_.rms_eps, c_.norm_plus_one, k);
  } else if (c_.qk_norm == QkNorm::PerHead && !qkv_adjacent) {
    b_.rms_norm_heads(q, L.q_norm, M, c_.n_head, c_.head_dim, c_.rms_eps, c_.norm_plus_one);
    b_.rms_norm_heads(k, L.k_norm, M, c_.n_head_kv, c_.head_dim, c_.rms_eps, c_.norm_plus_one);
  }
  if (qkv_adjacent) {
    // One token through the stacked weights has its k and v heads right after its q heads: one op
    // norms them per head (where not normed above), rotates q and k, and stores k and v.
    const bool per_head = c_.qk_norm == QkNorm::PerHead;
    const auto one =
        std::find_if(chunks.begin(), chunks.end(), [](const SeqChunk& ch) { return ch.n == 1; });
    const KvView& kv = one->kv->layer(l);
    b_.rope_kv_store(q, per_head ? L.q_norm : nullptr, per_head ? L.k_norm : nullptr, c_.n_head,
                     c_.n_head_kv, c_.rms_eps, c_.norm_plus_one, pos_.data(), L.rope, kv);
    b_.attention(q, kv, 1, pos_.data(), L.attn, att_);
  } else {
    b_.rope(q, M, c_.n_head, pos_.data(), L.rope);
    b_.rope(k, M, c_.n_head_kv, pos_.data(), L.rope);
    store_and_attend(l, chunks, M, q, k, v);
  }
  if (c_.attn_output_gate) b_.glu(Glu::Sigmoid, gate, att_, M, qw, qw, att_);
  b_.matmul(L.wo, att_, M, o_);
}

void Forward::store_and_attend(int64_t l, const std::vector<SeqChunk>& chunks, int64_t M,
                               const float* q, const float* k, const float* v) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t qw = c_.n_head * c_.head_dim, kvw = c_.n_head_kv * c_.head_dim;
  // Each sequence attends over its own cache: in a decode step of several, all in one op.
  if (decode_step_ && M > 1) {
    const KvView* kv = step_kv_.data() + l * kDecodeStepRows;
    b_.kv_store_each(kv, k, v, M, pos_.data());
    b_.attention_each(q, kv, M, pos_.data(), L.attn, att_);
  } else {
    int64_t row = 0;
    for (const SeqChunk& ch : chunks) {
      const KvView& kv = ch.kv->layer(l);
      const int32_t* pos = pos_.data() + row;
      b_.kv_store(kv, k + row * kvw, v + row * kvw, ch.n, pos);
      b_.attention(q + row * qw, kv, ch.n, pos, L.attn, att_ + row * qw);
      row += ch.n;
    }
  }
}

Glu Forward::glu_kind() const {
  return c_.ffn_act == FfnActivation::SiLU ? Glu::SiLU : Glu::GeluTanh;
}

void Forward::ffn_dense(int64_t l, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t ff = c_.n_ff;
  if (L.ffn_gate_up.data != nullptr) {
    b_.matmul(L.ffn_gate_up, h_, M, ff_gate_);
    b_.glu(glu_kind(), ff_gate_, ff_gate_ + ff, M, ff, 2 * ff, ff_act_);
  } else {
    b_.matmul(L.ffn_gate, h_, M, ff_gate_);
    b_.matmul(L.ffn_up, h_, M, ff_up_);
    b_.glu(glu_kind(), ff_gate_, ff_up_, M, ff, ff, ff_act_);
  }
  b_.matmul(L.ffn_down, ff_act_, M, o_);
}

bool Forward::experts_indexed(int64_t M) const {
  // Streamed experts and the device's paging serve one token's experts at a time.
  const bool resident =
      next_streamed_layer(-1) == c_.n_layer && !engine_.experts().pages_on_device();
  return experts_on_device_ && (M == 1 || (decode_step_ && resident));
}

void Forward::route(int64_t l, int64_t M, float* out) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t k = c_.n_expert_used;
  b_.matmul(L.router, h_, M, router_);
  const RouterArgs ra{c_.router, c_.n_expert, k, c_.norm_topk_prob, L.router_bias};
  // The weights right after the ids: one copy brings both back to the host.
  b_.route(router_, M, ra, reinterpret_cast<int32_t*>(out), out + M * k);
}

void Forward::ffn_moe(int64_t l, int64_t M) {
  const int64_t d = c_.n_embd, k = c_.n_expert_used, ff = c_.n_ff_expert;
  const auto* ids = reinterpret_cast<const int32_t*>(routing_);
  if (experts_indexed(M)) {
    // The k experts' matmuls of every token pick their weights on the device, from the layer's
    // table (streamed experts, one token: made present and published by fetch_streamed_experts()),
    // one launch a projection. Paged on the device (one token): the misses are read from host
    // memory and fill their slots on the way.
    const ExpertTable& t = *engine_.experts().table(l);
    const ExpertPages* pages = engine_.experts().pages(l);
    const int64_t n = M * k;
    // x: each token's row, shared by its k experts (one token: the one row, x_stride 0, which
    // spares the kernels a division), or each expert's own (x_stride ff).
    const int64_t token_stride = M > 1 ? d : 0;
    const auto matmul = [&](const Weight& shape, const void* const* experts, int proj,
                            const float* x, int64_t x_stride, int64_t experts_per_x, float* y) {
      if (pages == nullptr)
        return b_.matmul_indexed(shape, experts, ids, n, x, x_stride, experts_per_x, y);
      b_.matmul_indexed_filling(shape, experts, pages->fill + proj * c_.n_expert, ids, n, x,
                                x_stride, experts_per_x, y);
    };
    if (pages != nullptr) b_.page_experts(*pages, ids, k);  // one token
    if (t.gate_up_shape.rows > 0) {
      matmul(t.gate_up_shape, t.gate, 0, h_, token_stride, k, ff_gate_);
      b_.glu(glu_kind(), ff_gate_, ff_gate_ + ff, n, ff, 2 * ff, ff_act_);
    } else {
      matmul(t.gate_shape, t.gate, 0, h_, token_stride, k, ff_gate_);
      matmul(t.up_shape, t.up, 1, h_, token_stride, k, ff_up_);
      b_.glu(glu_kind(), ff_gate_, ff_up_, n, ff, ff, ff_act_);
    }
    matmul(t.down_shape, t.down, 2, ff_act_, ff, 1, ff_out_);
    if (pages != nullptr) b_.commit_experts(*pages, ids, k);
    // Summed by the next norm (add_ffn_out_norm), unless a norm of the FFN output or a shared
    // expert comes first.
    ffn_out_routed_ = true;
    if (c_.sandwich_norms || c_.n_ff_shared > 0) sum_routed_rows(M);
    shared_expert(l, M);
    return;
  }
  routing_host_.resize(static_cast<size_t>(2 * M * k));
  b_.to_host(routing_host_.data(), routing_, routing_host_.size() * sizeof(float));
  ids_host_.resize(static_cast<size_t>(M * k));
  std::memcpy(ids_host_.data(), routing_host_.data(), ids_host_.size() * sizeof(int32_t));
  const float* weights_host = routing_host_.data() + M * k;
  // The M * k routed rows in expert-major order (experts ascending, tokens ascending within
  // each), by a counting sort: routed_src_[p] is the token of row p, routed_scale_[p] its weight.
  // The one scatter at the end then adds each token's experts in ascending id order, the same sum
  // whether the experts ran together (resident) or one by one (streaming): bit-identical.
  const int64_t E = c_.n_expert, P = M * k;
  std::vector<int64_t> count(static_cast<size_t>(E + 1), 0);
  for (int32_t e : ids_host_) count[static_cast<size_t>(e) + 1]++;
  expert_ids_.clear();
  group_row0_.clear();
  group_rows_.clear();
  for (int64_t e = 0; e < E; ++e) {
    if (count[static_cast<size_t>(e) + 1] > 0) {
      expert_ids_.push_back(static_cast<int32_t>(e));
      group_row0_.push_back(count[static_cast<size_t>(e)]);
      group_rows_.push_back(count[static_cast<size_t>(e) + 1]);
    }
    count[static_cast<size_t>(e) + 1] += count[static_cast<size_t>(e)];
  }
  routed_src_.resize(static_cast<size_t>(P));
  routed_scale_.resize(static_cast<size_t>(P));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < k; ++i) {
      const size_t p = static_cast<size_t>(count[static_cast<size_t>(ids_host_[m * k + i])]++);
      routed_src_[p] = static_cast<int32_t>(m);
      routed_scale_[p] = weights_host[m * k + i];
    }
  b_.gather_rows(h_, routed_src_.data(), P, d, rows_);
  ExpertStore& store = engine_.experts();
  if (store.prefetching()) prefetch_next_layer(l, M);
  const int64_t G = static_cast<int64_t>(expert_ids_.size());
  if (!store.streaming()) {
    // Resident: every routed expert in one call per projection.
    group_weights_.resize(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g)
      group_weights_[static_cast<size_t>(g)] =
          &store.resident(l, expert_ids_[static_cast<size_t>(g)]);
    experts_ffn(group_weights_.data(), group_row0_.data(), group_rows_.data(), G);
  } else {
    // Streaming: a micro-batch may route to more experts than there are slots, so they come in
    // waves; each expert runs alone as soon as it is ready, with the same kernels per row.
    // In a batched decode step on a backend that runs resident experts by id (see
    // kDecodeStepRows), each of an expert's rows runs alone, the matmuls of its own decode, so
    // that streamed experts give the bits of resident ones. Where resident experts are grouped on
    // the host as well (the CPU), an expert's rows stay one group, its weights read once for them.
    const bool row_by_row = decode_step_ && experts_on_device_;
    const int64_t wave = store.slots_per_layer();
    if (store.pages_on_device()) store.slots_to_host(l);
    for (int64_t w0 = 0; w0 < G; w0 += wave) {
      const int64_t n = std::min(wave, G - w0);
      store.acquire(l, expert_ids_.data() + w0, n);
      for (int64_t i = 0; i < n; ++i) {
        const ExpertWeights* ew = &store.ready(l, i);  // compute starts on the first expert read
        const int64_t row0 = group_row0_[static_cast<size_t>(w0 + i)];
        const int64_t rows = group_rows_[static_cast<size_t>(w0 + i)];
        if (!row_by_row) {
          experts_ffn(&ew, &row0, &rows, 1);
          continue;
        }
        const int64_t one = 1;
        for (int64_t r = row0; r < row0 + rows; ++r) experts_ffn(&ew, &r, &one, 1);
      }
    }
    if (store.pages_on_device()) store.slots_to_device(l);
  }
  b_.zero(o_, M * d);
  b_.scatter_add_rows(o_, ff_out_, routed_src_.data(), routed_scale_.data(), P, d);
  shared_expert(l, M);
}

void Forward::shared_expert(int64_t l, int64_t M) {
  const SharedExpertWeights& S = engine_.layers()[static_cast<size_t>(l)].shared;
  if (S.down.data == nullptr) return;
  const int64_t d = c_.n_embd, ff = c_.n_ff_shared;
  // The routed experts are done with the FFN-wide buffers (sized for this width too), the gathered
  // rows (rows_, M x k rows of d) and the router logits (router_, M x n_expert).
  if (S.gate_up.data != nullptr) {
    b_.matmul(S.gate_up, h_, M, ff_gate_);
    b_.glu(glu_kind(), ff_gate_, ff_gate_ + ff, M, ff, 2 * ff, ff_act_);
  } else {
    b_.matmul(S.gate, h_, M, ff_gate_);
    b_.matmul(S.up, h_, M, ff_up_);
    b_.glu(glu_kind(), ff_gate_, ff_up_, M, ff, ff, ff_act_);
  }
  b_.matmul(S.down, ff_act_, M, rows_);
  if (S.gate_inp.data == nullptr) {
    b_.add(o_, rows_, M * d);
    return;
  }
  b_.matmul(S.gate_inp, h_, M, router_);
  b_.add_gated_rows(o_, rows_, router_, M, d);
}

void Forward::experts_ffn(const ExpertWeights* const* ew, const int64_t* row0, const int64_t* rows,
                          int64_t G) {
  const int64_t ff = c_.n_ff_expert;
  // The groups are consecutive runs of rows: glu runs once over all of them.
  const int64_t lo = row0[0], n = row0[G - 1] + rows[G - 1] - lo;
  bool stacked = true;
  for (int64_t g = 0; g < G; ++g) stacked = stacked && ew[g]->gate_up.rows > 0;
  const auto pointers = [&](Weight ExpertWeights::*proj) {
    group_ptrs_.resize(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g) group_ptrs_[static_cast<size_t>(g)] = (ew[g]->*proj).data;
    return group_ptrs_.data();
  };
  if (stacked) {
    b_.matmul_grouped(ew[0]->gate_up, pointers(&ExpertWeights::gate_up), row0, rows, G, rows_,
                      ff_gate_);
    b_.glu(glu_kind(), ff_gate_ + lo * 2 * ff, ff_gate_ + lo * 2 * ff + ff, n, ff, 2 * ff,
           ff_act_ + lo * ff);
  } else {
    b_.matmul_grouped(ew[0]->gate, pointers(&ExpertWeights::gate), row0, rows, G, rows_, ff_gate_);
    b_.matmul_grouped(ew[0]->up, pointers(&ExpertWeights::up), row0, rows, G, rows_, ff_up_);
    b_.glu(glu_kind(), ff_gate_ + lo * ff, ff_up_ + lo * ff, n, ff, ff, ff_act_ + lo * ff);
  }
  b_.matmul_grouped(ew[0]->down, pointers(&ExpertWeights::down), row0, rows, G, ff_act_, ff_out_);
}

void Forward::prefetch_next_layer(int64_t l, int64_t M) {
  // The next MoE layer's router applied to this layer's FFN input predicts which experts it
  // will want (the residual stream changes little between adjacent layers); their reads then
  // overlap this layer's expert compute and the next layer's attention.
  int64_t next = l + 1;
  while (next < c_.n_layer && !engine_.layers()[static_cast<size_t>(next)].moe) ++next;
  if (next >= c_.n_layer) return;
  const LayerWeights& N = engine_.layers()[static_cast<size_t>(next)];
  const int64_t E = c_.n_expert, k = c_.n_expert_used;
  b_.matmul(N.router, h_, M, router_);
  router_host_.resize(static_cast<size_t>(M * E));
  b_.to_host(router_host_.data(), router_, static_cast<size_t>(M * E) * sizeof(float));
  const RouterArgs ra{c_.router, E, k, c_.norm_topk_prob,
                      N.router_bias_host.empty() ? nullptr : N.router_bias_host.data()};
  std::vector<int64_t> votes(static_cast<size_t>(E), 0);
  std::vector<int32_t> ids(static_cast<size_t>(k));
  std::vector<float> w(static_cast<size_t>(k));
  for (int64_t m = 0; m < M; ++m) {
    route_token(router_host_.data() + m * E, ra, ids.data(), w.data());
    for (int32_t e : ids) votes[static_cast<size_t>(e)]++;
  }
  std::vector<int32_t> order;
  for (int32_t e = 0; e < E; ++e)
    if (votes[static_cast<size_t>(e)] > 0) order.push_back(e);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return votes[static_cast<size_t>(a)] > votes[static_cast<size_t>(b)];
  });
  if (static_cast<int64_t>(order.size()) > engine_.experts().slots_per_layer())
    order.resize(static_cast<size_t>(engine_.experts().slots_per_layer()));
  engine_.experts().prefetch(next, order.data(), static_cast<int64_t>(order.size()));
}

}  // namespace ts
