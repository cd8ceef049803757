#include "runtime/forward.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "moe/expert_parallel_ffn.h"
#include "runtime/media_rows.h"
#include "runtime/mixers/attention_mixer.h"
#include "runtime/mixers/delta_net_mixer.h"
#include "runtime/mixers/mla_mixer.h"
#include "runtime/per_layer_inputs.h"

namespace ts {
namespace {

// The rows [first, last) of a chunk whose logits (or final hidden states) are wanted, copied out
// or scored.
int64_t first_wanted(const SeqChunk& ch) {
  if (ch.logits != nullptr || ch.hidden != nullptr) return ch.all_rows ? 0 : ch.n - 1;
  return ch.targets != nullptr ? ch.score_from : ch.n;
}
int64_t last_wanted(const SeqChunk& ch) {
  return ch.logits != nullptr || ch.hidden != nullptr || ch.targets == nullptr ? ch.n : ch.score_to;
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
  const auto B = static_cast<size_t>(max_rows_);
  const auto d = static_cast<size_t>(c_.n_embd);
  const size_t k = c_.is_moe() ? static_cast<size_t>(c_.n_expert_used) : 0;
  // The gathered rows and the expert output hold all M * k routed rows of an MoE micro-batch: its
  // experts run over all of them at once; so do the FFN-wide buffers (ffn_row_floats).
  const size_t ffn_rows = B * std::max<size_t>(k, 1);
  const size_t ff = B * static_cast<size_t>(ffn_row_floats(c_));
  x_ = scratch(B * d);
  h_ = scratch(B * d);
  o_ = scratch(B * d);
  ff_rows_ = scratch(ffn_rows * d);
  const auto alloc = [this](size_t floats) { return scratch(floats); };
  if (c_.has_mixer(MixerKind::Attention))
    attention_ = std::make_unique<AttentionMixer>(engine_, max_rows_, alloc);
  if (c_.has_mixer(MixerKind::DeltaNet))
    delta_net_ = std::make_unique<DeltaNetMixer>(engine_, max_rows_, alloc);
  if (c_.has_mixer(MixerKind::Mla)) mla_ = std::make_unique<MlaMixer>(engine_, max_rows_, alloc);
  for (const LayerWeights& L : engine_.layers())
    mixers_.push_back(L.mixer == MixerKind::DeltaNet ? static_cast<Mixer*>(delta_net_.get())
                      : L.mixer == MixerKind::Mla    ? static_cast<Mixer*>(mla_.get())
                                                     : attention_.get());
  // Gate and up in one buffer: a stacked matmul writes each row as [gate | up].
  ff_gate_ = scratch(2 * ff);
  ff_up_ = ff_gate_ + ff;
  ff_act_ = scratch(ff);
  ff_out_ = scratch(ffn_rows * d);
  if (c_.is_moe()) {
    std::vector<const MoeLayerWeights*> moe_layers;
    for (const LayerWeights& L : engine_.layers())
      moe_layers.push_back(L.moe ? &L.routed : nullptr);
    moe_ =
        std::make_unique<MoeFfn>(b_, c_, engine_.experts(), std::move(moe_layers), max_rows_,
                                 FfnBuffers{ff_gate_, ff_up_, ff_act_, ff_rows_, ff_out_}, alloc);
  }
  if (c_.n_embd_per_layer > 0)
    per_layer_ = std::make_unique<PerLayerInputs>(engine_, max_rows_, alloc);
  if (c_.moe_dense_beside) {
    h2_ = scratch(B * d);
    o2_ = scratch(B * d);
  }
  logits_ = scratch(static_cast<size_t>(std::min(max_rows_, head_rows_) * c_.n_vocab));
  ids_.resize(B);
  pos_.resize(B);
  if (c_.mrope()) rope_pos_.resize(3 * B);
  media_rows_ = std::make_unique<MediaRows>(engine_, max_rows_, alloc);
  // A recorded step re-reads the head's row list from where it was: it must never move.
  wanted_rows_.reserve(B);
}

Forward::~Forward() {
  expert_parallel_.reset();
  moe_.reset();
  for (void* p : buffers_) b_.free(p);
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
    if (ch.in.rope_pos != nullptr && !c_.mrope())
      fail(ErrorKind::Input, std::string("3-D positions given to a model without M-RoPE (") +
                                 family_name(c_.family) + ")");
    if (ch.in.deepstack != nullptr && c_.n_deepstack == 0)
      fail(ErrorKind::Input, std::string("DeepStack features given to a model without them (") +
                                 family_name(c_.family) + ")");
    if (ch.in.whole_images(ch.n) != ch.n)
      fail(ErrorKind::Input,
           "an image's rows, which attend to each other, do not fit in one pass of " +
               std::to_string(ch.n) +
               " rows (an image goes whole into one prefill pass: raise "
               "--prefill-batch; token by token cannot feed it)");
    for (int64_t i = 0; i < ch.n; ++i, ++M) {
      if (ch.tokens[i] < 0 || ch.tokens[i] >= vocab)
        fail(ErrorKind::Input, "token id " + std::to_string(ch.tokens[i]) +
                                   " is outside the vocabulary of " + std::to_string(vocab));
      const bool image_row = ch.in.embeds != nullptr && ch.in.embeds[i] != nullptr;
      ids_[static_cast<size_t>(M)] = image_row ? c_.image_row_token : ch.tokens[i];
      pos_[static_cast<size_t>(M)] = static_cast<int32_t>(ch.kv->n_past() + i);
      if (c_.mrope()) {
        int32_t* rp = rope_pos_.data() + 3 * M;
        for (int s = 0; s < 3; ++s)
          rp[s] = ch.in.rope_pos != nullptr
                      ? ch.in.rope_pos[3 * i + s]
                      : static_cast<int32_t>(ch.kv->n_past() + i + ch.kv->rope_shift());
      }
    }
  }
  if (M == 0) return;
  media_ = false;
  bool hidden = false;
  for (const SeqChunk& ch : chunks) {
    media_ = media_ || ch.in.embeds || ch.in.deepstack || ch.in.span;
    hidden = hidden || ch.hidden != nullptr;
  }
  // A pass with image rows is never a recorded step: its inputs change every time; nor is one
  // with hidden states wanted, whose head runs over fewer rows than it norms.
  decode_step_ = M <= kDecodeStepRows && !media_ && !hidden;
  for (const SeqChunk& ch : chunks) decode_step_ = decode_step_ && ch.n == 1;
  if (decode_step_ && M > 1 && attention_) attention_->prepare_step(chunks);
  // The head runs only on the rows whose logits are wanted; the rows whose hidden states are
  // wanted are listed after them, normed with them and copied out without the head. Listed here,
  // outside a recorded step, whose ops a replay does not run again.
  wanted_rows_.clear();
  for (const bool want_hidden : {false, true}) {
    int64_t row = 0;
    for (const SeqChunk& ch : chunks) {
      if ((ch.hidden != nullptr) == want_hidden)
        for (int64_t i = first_wanted(ch); i < last_wanted(ch); ++i)
          wanted_rows_.push_back(static_cast<int32_t>(row + i));
      row += ch.n;
    }
    if (!want_hidden) head_wanted_ = static_cast<int64_t>(wanted_rows_.size());
  }
  const auto wanted = static_cast<int64_t>(wanted_rows_.size());
  // A decode step (one token of each of a few sequences) queues the same ops every step, over
  // the same buffers and the same KV caches; only ids_, pos_ and wanted_rows_ change (checked
  // above, and kept where they are). The backend may record it once and replay it. Streamed
  // experts are known only once their layer's router has run: such a step (one sequence) is
  // recorded in pieces, each ending with one layer's routing queued back to the host, which then
  // makes that layer's experts present. MoE layers that group their rows on the host run eagerly.
  // Expert parallelism's exchanges depend on the routing: eager (docs/PARALLEL.md, graphs).
  const bool same_every_step =
      decode_step_ && !expert_parallel_ && (!moe_ || moe_->experts_indexed(M, decode_step_));
  if (same_every_step) {
    std::vector<const void*> states(chunks.size());
    for (size_t s = 0; s < chunks.size(); ++s) states[s] = chunks[s].kv;
    for (int64_t from = -1;;) {
      const int64_t stop = moe_ ? moe_->next_streamed_layer(from) : c_.n_layer;
      const StepKey key{this, states, (from + 1) * (max_rows_ + 1) + wanted};
      b_.run_recorded(key, [&] {
        layers(chunks, M, from, stop);
        if (stop == c_.n_layer) head(M);
      });
      if (stop == c_.n_layer) break;
      moe_->fetch_streamed_experts(stop);
      from = stop;
    }
  } else {
    layers(chunks, M, -1, c_.n_layer);
    head(M);
  }
  for (const SeqChunk& ch : chunks) {
    ch.kv->advance(ch.n);
    // Rows after explicit 3-D positions continue from the largest of them (transformers'
    // rope_deltas): the shift the rows fed without positions take.
    if (ch.in.rope_pos != nullptr) {
      const int32_t* rp = ch.in.rope_pos;
      const int64_t top = *std::max_element(rp, rp + 3 * ch.n);
      ch.kv->set_rope_shift(top + 1 - ch.kv->n_past());
    }
  }
  // head() queued the logits of the first head_rows_ wanted rows (decode's one row inside its
  // recorded step, as before); the rest follow a chunk at a time through the same buffer, each
  // copied out before the next overwrites it (a device's to_host waits for the chunk).
  for (int64_t r0 = 0; r0 < head_wanted_; r0 += head_rows_) {
    if (r0 > 0) head_logits(r0);
    copy_logits(chunks, r0);
  }
  if (hidden) copy_hidden(chunks);
}

void Forward::layers(const std::vector<SeqChunk>& chunks, int64_t M, int64_t from, int64_t stop) {
  const int64_t d = c_.n_embd;
  const float eps = c_.rms_eps;
  const bool plus_one = c_.norm_plus_one;
  const PassRows rows{chunks, M, pos_.data(), decode_step_,
                      c_.mrope() ? rope_pos_.data() : pos_.data()};
  if (from < 0) {
    b_.embed(engine_.token_embd(), ids_.data(), M, c_.embed_scale, x_);
    if (media_) media_rows_->prepare(chunks, x_);
  }
  // The per-layer inputs of an image row: its image_row_token's table entry and the projection
  // of its image feature.
  if (from < 0 && per_layer_) per_layer_->prepare(ids_.data(), x_, M);
  // norm -> mixer -> norm -> FFN. Each residual add is fused with the norm after it: the FFN's
  // output joins x_ in the next layer's first norm, and the last layer's in the head's norm.
  for (int64_t l = std::max<int64_t>(from, 0); l < c_.n_layer; ++l) {
    const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
    if (l != from) {
      if (l == 0) {
        b_.rms_norm(x_, L.attn_norm, M, d, eps, plus_one, h_);
      } else {
        add_ffn_out_norm(L.attn_norm, M);
      }
      mixers_[static_cast<size_t>(l)]->run(l, rows, h_, o_);
      if (c_.sandwich_norms) b_.rms_norm(o_, L.attn_post_norm, M, d, eps, plus_one, o_);
      b_.add_rms_norm(x_, o_, L.ffn_norm, M, d, eps, plus_one, h_);
      if (L.moe && c_.moe_dense_beside) {
        dense_ffn_then_route(l, M);
      } else if (L.moe) {
        moe_->route(l, h_, M);
      }
      // A recorded step of one token with streamed experts ends here, once the layer is routed:
      // the host makes its experts present, then the next piece starts with them (run()).
      if (l == stop) return moe_->read_back_routing(l, h_);
    }
    if (L.moe && c_.moe_dense_beside) {
      experts_beside_dense_ffn(l, M);
    } else if (L.moe) {
      run_experts(l, h_, M, o_);
    } else {
      ffn_dense(l, M);
    }
    if (c_.sandwich_norms) b_.rms_norm(o_, L.ffn_post_norm, M, d, eps, plus_one, o_);
    if (per_layer_ || c_.layer_output_scale) layer_tail(l, M);
    // x_ still lacks this FFN's output (added with the next norm): the sum is the same.
    if (media_ && l < c_.n_deepstack) media_rows_->add(l, x_);
  }
}

void Forward::run_experts(int64_t l, const float* h, int64_t M, float* out) {
  if (expert_parallel_) return expert_parallel_->run(l, h, M, out);
  moe_->run(l, h, M, decode_step_, out);
}

void Forward::expert_parallel(Communicator& comm, ExpertPlacement place) {
  if (!moe_) fail(ErrorKind::Usage, "--expert-parallel: the model has no routed experts");
  expert_parallel_ = std::make_unique<ExpertParallelFfn>(
      b_, c_, *moe_, FfnBuffers{ff_gate_, ff_up_, ff_act_, ff_rows_, ff_out_}, comm,
      std::move(place), max_rows_);
}

void Forward::dense_ffn_then_route(int64_t l, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t d = c_.n_embd;
  ffn_dense(l, M);
  b_.rms_norm(o_, L.ffn_post_norm_1, M, d, c_.rms_eps, c_.norm_plus_one, o_);
  // The router and the experts read the residual stream, each through its own norm.
  b_.rms_norm(x_, L.router_norm, M, d, c_.rms_eps, false, h2_);
  moe_->route(l, h2_, M);
}

void Forward::experts_beside_dense_ffn(int64_t l, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t d = c_.n_embd;
  const float eps = c_.rms_eps;
  const bool plus_one = c_.norm_plus_one;
  b_.rms_norm(x_, L.ffn_pre_norm_2, M, d, eps, plus_one, h2_);
  run_experts(l, h2_, M, o2_);
  moe_->sum_output(M, o2_);
  b_.rms_norm(o2_, L.ffn_post_norm_2, M, d, eps, plus_one, o2_);
  b_.add(o_, o2_, M * d);
}

void Forward::layer_tail(int64_t l, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t n = M * c_.n_embd;
  b_.add(x_, o_, n);
  if (per_layer_) per_layer_->add(l, x_, M);
  if (L.out_scale != 1.0f) b_.scale(x_, n, L.out_scale);
  b_.zero(o_, n);
}

void Forward::head(int64_t M) {
  if (wanted_rows_.empty()) return;
  const int64_t d = c_.n_embd, R = static_cast<int64_t>(wanted_rows_.size());
  // x_ still lacks the last layer's FFN output (see layers()). Hidden rows listed after the
  // logits' rows put the list out of order: then it is gathered too.
  if (R < M || !std::is_sorted(wanted_rows_.begin(), wanted_rows_.end())) {
    if (moe_) moe_->sum_output(M, o_);
    b_.add(x_, o_, M * d);
    b_.gather_rows(x_, wanted_rows_.data(), R, d, ff_rows_);
    b_.rms_norm(ff_rows_, engine_.output_norm(), R, d, c_.rms_eps, c_.norm_plus_one, h_);
  } else {
    add_ffn_out_norm(engine_.output_norm(), M);
  }
  if (head_wanted_ > 0) head_logits(0);
}

void Forward::add_ffn_out_norm(const float* w, int64_t M) {
  if (moe_) return moe_->add_output_norm(x_, o_, w, M, c_.rms_eps, c_.norm_plus_one, h_);
  b_.add_rms_norm(x_, o_, w, M, c_.n_embd, c_.rms_eps, c_.norm_plus_one, h_);
}

Glu Forward::glu_kind() const {
  return c_.ffn_act == FfnActivation::SiLU ? Glu::SiLU : Glu::GeluTanh;
}

void Forward::head_logits(int64_t r0) {
  const int64_t V = c_.n_vocab;
  const int64_t n = std::min(head_rows_, head_wanted_ - r0);
  b_.matmul(engine_.output(), h_ + r0 * c_.n_embd, n, logits_);
  if (c_.final_softcap > 0) b_.softcap(logits_, n * V, c_.final_softcap);
}

void Forward::copy_logits(const std::vector<SeqChunk>& chunks, int64_t r0) {
  const int64_t V = c_.n_vocab;
  const int64_t r1 = std::min(r0 + head_rows_, head_wanted_);
  // Each chunk's wanted rows are a run [r, r + rows) of wanted_rows_; the part of it in
  // [r0, r1) is contiguous on both sides, so it takes one copy (or one scoring).
  int64_t r = 0;
  for (const SeqChunk& ch : chunks) {
    if (ch.hidden != nullptr) continue;
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

void Forward::copy_hidden(const std::vector<SeqChunk>& chunks) {
  const int64_t d = c_.n_embd;
  int64_t r = head_wanted_;
  for (const SeqChunk& ch : chunks) {
    if (ch.hidden == nullptr) continue;
    const int64_t rows = last_wanted(ch) - first_wanted(ch);
    b_.to_host(ch.hidden, h_ + r * d, static_cast<size_t>(rows * d) * sizeof(float));
    r += rows;
  }
}

void Forward::ffn_dense(int64_t l, int64_t M) {
  const LayerWeights& L = engine_.layers()[static_cast<size_t>(l)];
  const int64_t ff = c_.n_ff_of(l);
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

}  // namespace ts
