#include "moe/moe_ffn.h"

#include <algorithm>
#include <cstring>

#include "backend/routing.h"
#include "core/error.h"

namespace ts {

MoeFfn::MoeFfn(Backend& b, const ArchConfig& c, ExpertStore& store,
               std::vector<const MoeLayerWeights*> layers, int64_t max_rows,
               const FfnBuffers& buffers, const std::function<float*(size_t)>& scratch)
    : b_(b), c_(c), store_(store), layers_(std::move(layers)), buf_(buffers) {
  guesses_.resize(static_cast<size_t>(c_.n_layer));
  const auto B = static_cast<size_t>(max_rows), k = static_cast<size_t>(c_.n_expert_used);
  router_ = scratch(B * static_cast<size_t>(c_.n_expert));
  routing_ = scratch(B * 2 * k);
  // Experts with biases run grouped on the host's routing, which knows each group's expert.
  experts_on_device_ = b_.indexes_experts_on_device() && !c_.expert_bias;
  for (int64_t l = 0; l < c_.n_layer; ++l)
    if (layers_[static_cast<size_t>(l)] != nullptr && store_.table(l) == nullptr)
      experts_on_device_ = false;
  predicted_ = scratch(2 * k);
  routed_ids_ = static_cast<int32_t*>(b_.alloc_host_pinned(2 * k * sizeof(int32_t)));
}

MoeFfn::~MoeFfn() {
  b_.free_host_pinned(routed_ids_);
}

void MoeFfn::activate(const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
                      float* out) {
  switch (c_.ffn_act) {
    case FfnActivation::SiLU:
      return b_.glu(Glu::SiLU, gate, up, rows, n, stride, out);
    case FfnActivation::GeluTanh:
      return b_.glu(Glu::GeluTanh, gate, up, rows, n, stride, out);
    case FfnActivation::SwiGluClamped:
      return b_.glu_clamped(gate, up, rows, n, stride, {c_.swiglu_alpha, c_.swiglu_limit}, out);
  }
}

void MoeFfn::add_gate_up_bias(const MoeLayerWeights& W, const int32_t* ids, const int64_t* row0,
                              const int64_t* rows, int64_t G, bool stacked) {
  if (W.gate_up_bias == nullptr) return;
  const int64_t ff = c_.n_ff_expert;
  for (int64_t g = 0; g < G; ++g) {
    const float* bias = W.gate_up_bias + ids[g] * 2 * ff;
    if (stacked) {
      b_.add_bias(buf_.gate + row0[g] * 2 * ff, bias, rows[g], 2 * ff);
    } else {
      b_.add_bias(buf_.gate + row0[g] * ff, bias, rows[g], ff);
      b_.add_bias(buf_.up + row0[g] * ff, bias + ff, rows[g], ff);
    }
  }
}

void MoeFfn::add_down_bias(const MoeLayerWeights& W, const int32_t* ids, const int64_t* row0,
                           const int64_t* rows, int64_t G) {
  if (W.down_bias == nullptr) return;
  const int64_t d = c_.n_embd;
  for (int64_t g = 0; g < G; ++g)
    b_.add_bias(buf_.out + row0[g] * d, W.down_bias + ids[g] * d, rows[g], d);
}

void MoeFfn::add_output_norm(float* x, float* out, const float* w, int64_t M, float eps,
                             bool plus_one, float* h) {
  const int64_t d = c_.n_embd, k = c_.n_expert_used;
  if (!output_routed_) return b_.add_rms_norm(x, out, w, M, d, eps, plus_one, h);
  const auto* ids = reinterpret_cast<const int32_t*>(routing_);
  b_.combine_add_rms_norm(buf_.out, ids, routing_ + M * k, k, x, w, M, d, eps, plus_one, out, h);
  output_routed_ = false;
}

void MoeFfn::sum_output(int64_t M, float* out) {
  if (!output_routed_) return;
  const int64_t k = c_.n_expert_used;
  const auto* ids = reinterpret_cast<const int32_t*>(routing_);
  b_.combine_experts(buf_.out, ids, routing_ + M * k, M, k, c_.n_embd, out);
  output_routed_ = false;
}

void MoeFfn::read_back_routing(int64_t l, const float* h) {
  // Ids and weights stay where route() put them; the host needs the ids alone.
  const size_t ids_bytes = static_cast<size_t>(c_.n_expert_used) * sizeof(int32_t);
  b_.to_host_async(routed_ids_, routing_, ids_bytes);
  if (predicts_next(l)) {
    // The next MoE layer's router over this layer's FFN input: the residual stream changes
    // little between adjacent layers, so its picks are mostly the ones that layer will make.
    route_into(next_streamed_layer(l), h, 1, predicted_);
    b_.to_host_async(routed_ids_ + c_.n_expert_used, predicted_, ids_bytes);
  }
}

int64_t MoeFfn::next_streamed_layer(int64_t from) const {
  // Experts paged on the device need no host between layers: the step is one piece.
  if (!store_.streaming() || store_.pages_on_device()) return c_.n_layer;
  int64_t l = from + 1;
  while (l < c_.n_layer && layers_[static_cast<size_t>(l)] == nullptr) ++l;
  return l;
}

void MoeFfn::fetch_streamed_experts(int64_t l) {
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
  const auto n = static_cast<int64_t>(experts.size());
  store_.acquire(l, experts.data(), n);
  for (int64_t i = 0; i < n; ++i) store_.ready(l, i);
  store_.publish_table(l);
  // Their copies queue behind this layer's, and run under its compute and the next attention.
  if (predicts_next(l)) {
    const std::vector<int32_t> guess = read_ids(routed_ids_ + k);
    store_.prefetch(next_streamed_layer(l), guess.data(), k);
  }
}

bool MoeFfn::predicts_next(int64_t l) const {
  return store_.prefetching() && next_streamed_layer(l) < c_.n_layer;
}

bool MoeFfn::experts_indexed(int64_t M, bool decode_step) const {
  // Streamed experts and the device's paging serve one token's experts at a time.
  const bool resident = next_streamed_layer(-1) == c_.n_layer && !store_.pages_on_device();
  return experts_on_device_ && (M == 1 || (decode_step && resident));
}

void MoeFfn::route(int64_t l, const float* h, int64_t M) {
  route_into(l, h, M, routing_);
}

void MoeFfn::route_into(int64_t l, const float* h, int64_t M, float* out) {
  const MoeLayerWeights& L = *layers_[static_cast<size_t>(l)];
  const int64_t k = c_.n_expert_used;
  b_.matmul(L.router, h, M, router_);
  if (L.router_logit_bias != nullptr) b_.add_bias(router_, L.router_logit_bias, M, c_.n_expert);
  const RouterArgs ra{c_.router,         c_.n_expert,     k,
                      c_.norm_topk_prob, L.router_bias,   c_.n_group,
                      c_.topk_group,     c_.routed_scale, L.expert_scale};
  // The weights right after the ids: one copy brings both back to the host.
  b_.route(router_, M, ra, reinterpret_cast<int32_t*>(out), out + M * k);
}

void MoeFfn::run(int64_t l, const float* h, int64_t M, bool decode_step, float* out) {
  output_routed_ = false;
  if (experts_indexed(M, decode_step)) {
    run_indexed(l, h, M);
    // Summed by the next norm (add_output_norm), unless a norm of the FFN output or a shared
    // expert comes first.
    if (c_.sandwich_norms || c_.n_ff_shared > 0) sum_output(M, out);
  } else {
    run_grouped(l, h, M, decode_step, out);
  }
  shared_expert(l, h, M, out);
}

void MoeFfn::run_indexed(int64_t l, const float* h, int64_t M) {
  const int64_t d = c_.n_embd, k = c_.n_expert_used, ff = c_.n_ff_expert;
  const auto* ids = reinterpret_cast<const int32_t*>(routing_);
  // The k experts' matmuls of every token pick their weights on the device, from the layer's
  // table (streamed experts, one token: made present and published by fetch_streamed_experts()),
  // one launch a projection. Paged on the device (one token): the misses are read from host
  // memory and fill their slots on the way.
  const ExpertTable& t = *store_.table(l);
  const ExpertPages* pages = store_.pages(l);
  const int64_t n = M * k;
  // x: each token's row, shared by its k experts (one token: the one row, x_stride 0, which
  // spares the kernels a division), or each expert's own (x_stride ff).
  const int64_t token_stride = M > 1 ? d : 0;
  const auto matmul = [&](const Weight& shape, const void* const* experts, int proj, const float* x,
                          int64_t x_stride, int64_t experts_per_x, float* y) {
    if (pages == nullptr)
      return b_.matmul_indexed(shape, experts, ids, n, x, x_stride, experts_per_x, y);
    b_.matmul_indexed_filling(shape, experts, pages->fill + proj * c_.n_expert, ids, n, x, x_stride,
                              experts_per_x, y);
  };
  if (pages != nullptr) b_.page_experts(*pages, ids, k);  // one token
  if (t.gate_up_shape.rows > 0) {
    matmul(t.gate_up_shape, t.gate, 0, h, token_stride, k, buf_.gate);
    activate(buf_.gate, buf_.gate + ff, n, ff, 2 * ff, buf_.act);
  } else {
    matmul(t.gate_shape, t.gate, 0, h, token_stride, k, buf_.gate);
    matmul(t.up_shape, t.up, 1, h, token_stride, k, buf_.up);
    activate(buf_.gate, buf_.up, n, ff, ff, buf_.act);
  }
  matmul(t.down_shape, t.down, 2, buf_.act, ff, 1, buf_.out);
  if (pages != nullptr) b_.commit_experts(*pages, ids, k);
  output_routed_ = true;
}

void MoeFfn::run_grouped(int64_t l, const float* h, int64_t M, bool decode_step, float* out) {
  const int64_t d = c_.n_embd, k = c_.n_expert_used;
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
  b_.gather_rows(h, routed_src_.data(), P, d, buf_.rows);
  if (M == 1 && store_.prefetching()) score_guesses(l);
  if (store_.prefetching()) prefetch_next_layer(l, h, M);
  const int64_t G = static_cast<int64_t>(expert_ids_.size());
  if (!store_.streaming()) {
    // Resident: every routed expert in one call per projection.
    run_expert_groups(l, expert_ids_.data(), group_row0_.data(), group_rows_.data(), G);
  } else {
    // Streaming: a micro-batch may route to more experts than there are slots, so they come in
    // waves; each expert runs alone as soon as it is ready, with the same kernels per row.
    // In a batched decode step on a backend that runs resident experts by id (see
    // kDecodeStepRows), each of an expert's rows runs alone, the matmuls of its own decode, so
    // that streamed experts give the bits of resident ones. Where resident experts are grouped on
    // the host as well (the CPU), an expert's rows stay one group, its weights read once for them.
    const bool row_by_row = decode_step && experts_on_device_;
    const int64_t wave = store_.slots_per_layer();
    if (store_.pages_on_device()) store_.slots_to_host(l);
    for (int64_t w0 = 0; w0 < G; w0 += wave) {
      const int64_t n = std::min(wave, G - w0);
      store_.acquire(l, expert_ids_.data() + w0, n);
      for (int64_t i = 0; i < n; ++i) {
        const ExpertWeights* ew = &store_.ready(l, i);  // compute starts on the first expert read
        const int64_t row0 = group_row0_[static_cast<size_t>(w0 + i)];
        const int64_t rows = group_rows_[static_cast<size_t>(w0 + i)];
        const int32_t* id = expert_ids_.data() + w0 + i;
        if (!row_by_row) {
          experts(l, id, &ew, &row0, &rows, 1);
          continue;
        }
        const int64_t one = 1;
        for (int64_t r = row0; r < row0 + rows; ++r) experts(l, id, &ew, &r, &one, 1);
      }
    }
    if (store_.pages_on_device()) store_.slots_to_device(l);
  }
  b_.zero(out, M * d);
  b_.scatter_add_rows(out, buf_.out, routed_src_.data(), routed_scale_.data(), P, d);
}

void MoeFfn::run_expert_groups(int64_t l, const int32_t* ids, const int64_t* row0,
                               const int64_t* rows, int64_t G) {
  if (store_.streaming())
    fail(ErrorKind::Unsupported,
         "--expert-parallel: streamed experts (--expert-slots, --memory-budget) are not run "
         "across ranks yet");
  group_weights_.resize(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g)
    group_weights_[static_cast<size_t>(g)] = &store_.resident(l, ids[g]);
  experts(l, ids, group_weights_.data(), row0, rows, G);
}

void MoeFfn::shared_expert(int64_t l, const float* h, int64_t M, float* out) {
  const SharedExpertWeights& S = layers_[static_cast<size_t>(l)]->shared;
  if (S.down.data == nullptr) return;
  const int64_t d = c_.n_embd, ff = c_.n_ff_shared;
  // The routed experts are done with the FFN-wide buffers (sized for this width too), the gathered
  // rows (buf_.rows, M x k rows of d) and the router logits (router_, M x n_expert).
  if (S.gate_up.data != nullptr) {
    b_.matmul(S.gate_up, h, M, buf_.gate);
    activate(buf_.gate, buf_.gate + ff, M, ff, 2 * ff, buf_.act);
  } else {
    b_.matmul(S.gate, h, M, buf_.gate);
    b_.matmul(S.up, h, M, buf_.up);
    activate(buf_.gate, buf_.up, M, ff, ff, buf_.act);
  }
  b_.matmul(S.down, buf_.act, M, buf_.rows);
  if (S.gate_inp.data == nullptr) {
    b_.add(out, buf_.rows, M * d);
    return;
  }
  b_.matmul(S.gate_inp, h, M, router_);
  b_.add_gated_rows(out, buf_.rows, router_, M, d);
}

void MoeFfn::experts(int64_t l, const int32_t* ids, const ExpertWeights* const* ew,
                     const int64_t* row0, const int64_t* rows, int64_t G) {
  const int64_t ff = c_.n_ff_expert;
  const MoeLayerWeights& W = *layers_[static_cast<size_t>(l)];
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
    b_.matmul_grouped(ew[0]->gate_up, pointers(&ExpertWeights::gate_up), row0, rows, G, buf_.rows,
                      buf_.gate);
    add_gate_up_bias(W, ids, row0, rows, G, true);
    activate(buf_.gate + lo * 2 * ff, buf_.gate + lo * 2 * ff + ff, n, ff, 2 * ff,
             buf_.act + lo * ff);
  } else {
    b_.matmul_grouped(ew[0]->gate, pointers(&ExpertWeights::gate), row0, rows, G, buf_.rows,
                      buf_.gate);
    b_.matmul_grouped(ew[0]->up, pointers(&ExpertWeights::up), row0, rows, G, buf_.rows, buf_.up);
    add_gate_up_bias(W, ids, row0, rows, G, false);
    activate(buf_.gate + lo * ff, buf_.up + lo * ff, n, ff, ff, buf_.act + lo * ff);
  }
  b_.matmul_grouped(ew[0]->down, pointers(&ExpertWeights::down), row0, rows, G, buf_.act, buf_.out);
  add_down_bias(W, ids, row0, rows, G);
}

// The next MoE layers' routers applied to this layer's FFN input predict which experts they will
// want (the residual stream changes little from layer to layer); their reads then overlap this
// layer's expert compute and the attention of the layers between. One layer ahead first: its
// guess is the likelier one. On the host two layers ahead; a device prefetches from its RAM tier
// one layer ahead.
void MoeFfn::prefetch_next_layer(int64_t l, const float* h, int64_t M) {
  const int depth = b_.is_host() ? kLookahead : 1;
  int64_t target = l;
  for (int d = 1; d <= depth; ++d) {
    target = next_moe_layer(target);
    if (target >= c_.n_layer) return;
    std::vector<int32_t> order = guess_experts(target, h, M);
    if (static_cast<int64_t>(order.size()) > store_.slots_per_layer())
      order.resize(static_cast<size_t>(store_.slots_per_layer()));
    if (M == 1) guesses_[static_cast<size_t>(target)][static_cast<size_t>(d - 1)] = order;
    store_.prefetch(target, order.data(), static_cast<int64_t>(order.size()));
  }
}

int64_t MoeFfn::next_moe_layer(int64_t l) const {
  int64_t next = l + 1;
  while (next < c_.n_layer && layers_[static_cast<size_t>(next)] == nullptr) ++next;
  return next;
}

// Layer `target`'s router over h: the experts its rows would pick, most voted first.
std::vector<int32_t> MoeFfn::guess_experts(int64_t target, const float* h, int64_t M) {
  const MoeLayerWeights& N = *layers_[static_cast<size_t>(target)];
  const int64_t E = c_.n_expert, k = c_.n_expert_used;
  b_.matmul(N.router, h, M, router_);
  if (N.router_logit_bias != nullptr) b_.add_bias(router_, N.router_logit_bias, M, E);
  router_host_.resize(static_cast<size_t>(M * E));
  b_.to_host(router_host_.data(), router_, static_cast<size_t>(M * E) * sizeof(float));
  const RouterArgs ra{c_.router,
                      E,
                      k,
                      c_.norm_topk_prob,
                      N.router_bias_host.empty() ? nullptr : N.router_bias_host.data(),
                      c_.n_group,
                      c_.topk_group,
                      c_.routed_scale,
                      N.expert_scale_host.empty() ? nullptr : N.expert_scale_host.data()};
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
  return order;
}

// A decode step's routing of layer l against what the layers before guessed for it; the guesses
// expire here.
void MoeFfn::score_guesses(int64_t l) {
  auto& guesses = guesses_[static_cast<size_t>(l)];
  for (int d = 1; d <= kLookahead; ++d) {
    std::vector<int32_t>& g = guesses[static_cast<size_t>(d - 1)];
    if (g.empty()) continue;
    int64_t hits = 0;
    for (int32_t e : ids_host_) hits += std::find(g.begin(), g.end(), e) != g.end() ? 1 : 0;
    store_.note_lookahead(l, d, hits, static_cast<int64_t>(ids_host_.size()));
    g.clear();
  }
}

}  // namespace ts
