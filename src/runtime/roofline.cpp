#include "runtime/roofline.h"

#include <algorithm>

#include "model/model_spec.h"

namespace ts {
namespace {

// Positions a layer's attention sees for a query at position `pos`.
double seen(const ArchConfig& c, int64_t layer, double pos) {
  const double all = pos + 1;
  if (c.layer_sliding[static_cast<size_t>(layer)] && c.sliding_window > 0)
    return std::min(all, static_cast<double>(c.sliding_window));
  return all;
}

// Mean over a layer's experts of one expert's bytes (gate + up + down).
double mean_expert_bytes(const LayerIndex& L) {
  double sum = 0;
  for (size_t e = 0; e < L.experts.size(); ++e)
    sum += static_cast<double>(L.expert_bytes(static_cast<int64_t>(e)));
  return L.experts.empty() ? 0 : sum / static_cast<double>(L.experts.size());
}

// Multiply-adds of one expert for one token (every expert of a layer has the same shape).
double expert_elements(const LayerIndex& L) {
  if (L.experts.empty()) return 0;
  double n = 0;
  for (const ExpertSlice& s : L.experts[0])
    n += static_cast<double>(s.rows) * static_cast<double>(s.cols);
  return n;
}

// Multiply-adds of the non-expert matrices of a layer for one token (vectors are not matrices).
double layer_matrix_macs(const LayerIndex& L) {
  double macs = 0;
  for (const auto& t : L.tensors)
    if (t && t->dims.size() == 2)
      macs += static_cast<double>(t->dims[0]) * static_cast<double>(t->dims[1]);
  return macs;
}

}  // namespace

DecodeBytes decode_bytes(const ModelSpec& spec, DType kv_type, double attended) {
  const ArchConfig& c = spec.cfg;
  DecodeBytes b;
  b.weights = spec.output.nbytes + spec.output_norm.nbytes +
              spec.token_embd.nbytes / static_cast<uint64_t>(c.n_vocab);
  // Per-layer embeddings: one row of the mapped table a token, and the projection (Gemma 4).
  if (spec.per_layer_embd)
    b.weights += spec.per_layer_embd->nbytes / static_cast<uint64_t>(c.n_vocab) +
                 spec.per_layer_model_proj->nbytes + spec.per_layer_proj_norm->nbytes;
  // A layer's rows are its own, or (KV sharing) the ones it reads: of that layer's width.
  const auto kv_row_of = [&](int64_t l) {
    const int64_t src = c.kv_source_of(l);
    return static_cast<double>(row_bytes(
        kv_type, static_cast<uint64_t>(c.n_head_kv_of(src) * c.head_dim_of(src)), "kv row"));
  };
  const double mla_row = c.has_mixer(MixerKind::Mla)
                             ? static_cast<double>(row_bytes(
                                   kv_type, static_cast<uint64_t>(c.mla.row_width()), "MLA row"))
                             : 0.0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerIndex& L = spec.layers[static_cast<size_t>(l)];
    for (const auto& t : L.tensors)
      if (t) b.weights += t->nbytes;
    if (!L.experts.empty())
      b.experts +=
          static_cast<uint64_t>(static_cast<double>(c.n_expert_used) * mean_expert_bytes(L));
    // An MLA layer reads one latent + rope row a position, as its key and as its value.
    const bool mla = c.layer_mixer[static_cast<size_t>(l)] == MixerKind::Mla;
    b.kv += (mla ? mla_row : 2 * kv_row_of(l)) * seen(c, l, attended - 1);
  }
  return b;
}

FeedFlops feed_flops(const ModelSpec& spec, int64_t n_past, int64_t n) {
  const ArchConfig& c = spec.cfg;
  double matrix_macs = 0, attention_macs = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerIndex& L = spec.layers[static_cast<size_t>(l)];
    const double per_token =
        layer_matrix_macs(L) + static_cast<double>(c.n_expert_used) * expert_elements(L);
    double attended = 0;
    for (int64_t i = 0; i < n; ++i) attended += seen(c, l, static_cast<double>(n_past + i));
    // q.k and p.v: head_dim multiply-adds per head per seen position, each (MLA: its row's).
    const int64_t width = c.layer_mixer[static_cast<size_t>(l)] == MixerKind::Mla
                              ? c.mla.row_width()
                              : c.head_dim_of(l);
    matrix_macs += per_token * static_cast<double>(n);
    attention_macs += 2.0 * static_cast<double>(c.n_head * width) * attended;
  }
  matrix_macs += static_cast<double>(c.n_embd) * static_cast<double>(c.n_vocab);
  return {2 * matrix_macs, 2 * attention_macs};
}

}  // namespace ts
