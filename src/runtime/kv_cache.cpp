#include "runtime/kv_cache.h"

#include <string>

#include "core/checked.h"
#include "core/error.h"
#include "runtime/engine.h"

namespace ts {

KvCache::KvCache(Engine& engine, int64_t ctx) : backend_(engine.backend()), ctx_(ctx) {
  const ArchConfig& c = engine.cfg();
  const DType type = engine.options().kv_type;
  const DeltaNetConfig& d = c.delta;
  const int64_t window = (d.conv_kernel - 1) * d.conv_channels();
  layers_.resize(static_cast<size_t>(c.n_layer));
  delta_.resize(static_cast<size_t>(c.n_layer));
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (c.layer_mixer[l] == MixerKind::DeltaNet) {
      delta_layers_.push_back(l);
      continue;
    }
    if (c.layer_mixer[l] == MixerKind::Mla) {
      // One row a position, [rope key | latent], which the absorbed attention reads as its key
      // and as its value: one buffer behind both of the view's pointers.
      const int64_t mla_width = c.mla.row_width();
      const uint64_t mla_row = row_bytes(type, static_cast<uint64_t>(mla_width), "MLA cache row");
      const uint64_t mla_bytes = checked_mul(mla_row, static_cast<uint64_t>(ctx), "MLA cache");
      void* buf = backend_.alloc(mla_bytes);
      layers_[l] = KvView{type, ctx, mla_width, static_cast<size_t>(mla_row), buf, buf};
      owns_.push_back(l);
      bytes_ += mla_bytes;
      continue;
    }
    // A layer that reads an earlier layer's rows (KV sharing) holds none: its view is that one's.
    const auto li = static_cast<int64_t>(l);
    if (!c.holds_kv(li)) {
      layers_[l] = layers_[static_cast<size_t>(c.kv_source_of(li))];
      continue;
    }
    const int64_t width = c.n_head_kv_of(li) * c.head_dim_of(li);
    const uint64_t row = row_bytes(type, static_cast<uint64_t>(width), "KV cache row");
    const uint64_t layer_bytes = checked_mul(row, static_cast<uint64_t>(ctx), "KV cache");
    layers_[l] = KvView{type,
                        ctx,
                        width,
                        static_cast<size_t>(row),
                        backend_.alloc(layer_bytes),
                        backend_.alloc(layer_bytes)};
    owns_.push_back(l);
    bytes_ += 2 * layer_bytes;
  }
  if (delta_layers_.empty()) return;
  state_floats_ = d.state_floats();
  const size_t state_bytes = static_cast<size_t>(state_floats_) * sizeof(float);
  for (size_t l : delta_layers_) {
    auto* buf = static_cast<float*>(backend_.alloc(state_bytes));  // zeroed: the empty state
    delta_[l] = DeltaStateView{buf, buf + window};
    bytes_ += state_bytes;
  }
  checkpoints_.resize(static_cast<size_t>(engine.options().state_checkpoints));
  for (Checkpoint& cp : checkpoints_)
    for (size_t i = 0; i < delta_layers_.size(); ++i) {
      cp.layers.push_back(static_cast<float*>(backend_.alloc(state_bytes)));
      bytes_ += state_bytes;
    }
}

KvCache::~KvCache() {
  for (size_t l : owns_) {
    backend_.free(layers_[l].k);
    if (layers_[l].v != layers_[l].k) backend_.free(layers_[l].v);
  }
  for (size_t l : delta_layers_) backend_.free(live(l));
  for (Checkpoint& cp : checkpoints_)
    for (float* p : cp.layers) backend_.free(p);
}

void KvCache::advance(int64_t n) {
  if (n < 0 || n_past_ + n > ctx_)
    fail(ErrorKind::Runtime, "internal: advancing a cache of " + std::to_string(n_past_) +
                                 " positions by " + std::to_string(n));
  n_past_ += n;
}

void KvCache::copy_state(const std::vector<float*>& to, const std::vector<float*>& from) {
  const size_t bytes = static_cast<size_t>(state_floats_) * sizeof(float);
  for (size_t i = 0; i < to.size(); ++i) backend_.copy(to[i], from[i], bytes);
}

void KvCache::zero_state() {
  for (size_t l : delta_layers_) backend_.zero(live(l), state_floats_);
}

void KvCache::checkpoint() {
  if (!recurrent() || checkpoints_.empty()) return;
  Checkpoint* slot = &checkpoints_[0];
  for (Checkpoint& cp : checkpoints_) {
    if (cp.pos == n_past_) return;
    if (cp.pos < 0 || (slot->pos >= 0 && cp.made < slot->made)) slot = &cp;
  }
  std::vector<float*> live_state;
  for (size_t l : delta_layers_) live_state.push_back(live(l));
  copy_state(slot->layers, live_state);
  slot->pos = n_past_;
  slot->made = ++made_;
}

const KvCache::Checkpoint* KvCache::latest_at_or_before(int64_t n) const {
  const Checkpoint* best = nullptr;
  for (const Checkpoint& cp : checkpoints_)
    if (cp.pos >= 0 && cp.pos <= n && (best == nullptr || cp.pos > best->pos)) best = &cp;
  return best;
}

int64_t KvCache::resumable(int64_t n) const {
  if (n < 0 || n > n_past_)
    fail(ErrorKind::Runtime,
         "internal: position " + std::to_string(n) + " of a cache of " + std::to_string(n_past_));
  if (!recurrent() || n == n_past_) return n;
  const Checkpoint* cp = latest_at_or_before(n);
  return cp != nullptr ? cp->pos : 0;
}

int64_t KvCache::rewind(int64_t n) {
  const int64_t to = resumable(n);
  if (to == n_past_) return to;
  if (recurrent()) {
    if (const Checkpoint* cp = latest_at_or_before(to); cp != nullptr && cp->pos == to) {
      std::vector<float*> live_state;
      for (size_t l : delta_layers_) live_state.push_back(live(l));
      copy_state(live_state, cp->layers);
    } else {
      zero_state();  // position 0
    }
    // Checkpoints past the new end hold states of tokens about to be replaced.
    for (Checkpoint& cp : checkpoints_)
      if (cp.pos > to) cp.pos = -1;
  }
  n_past_ = to;
  while (!shifts_.empty() && shifts_.back().first > to) shifts_.pop_back();
  return to;
}

void KvCache::set_rope_shift(int64_t shift) {
  if (shift == rope_shift()) return;
  while (!shifts_.empty() && shifts_.back().first >= n_past_) shifts_.pop_back();
  shifts_.emplace_back(n_past_, shift);
}

int64_t KvCache::copy_rows_from(const KvCache& from, int64_t rows) {
  if (rows < 0 || rows > from.n_past_ || rows > ctx_ || from.layers_.size() != layers_.size())
    fail(ErrorKind::Runtime, "KV cache: cannot copy " + std::to_string(rows) +
                                 " rows of a cache holding " + std::to_string(from.n_past_));
  rows = from.resumable(rows);
  shifts_.clear();
  for (const auto& s : from.shifts_)
    if (s.first <= rows) shifts_.push_back(s);
  for (size_t l : owns_) {
    const size_t bytes = static_cast<size_t>(rows) * layers_[l].row_bytes;
    backend_.copy(layers_[l].k, from.layers_[l].k, bytes);
    if (layers_[l].v != layers_[l].k) backend_.copy(layers_[l].v, from.layers_[l].v, bytes);
  }
  if (recurrent()) {
    for (Checkpoint& cp : checkpoints_) cp.pos = -1;
    std::vector<float*> to, src;
    for (size_t l : delta_layers_) to.push_back(live(l));
    const Checkpoint* cp = rows == from.n_past_ ? nullptr : from.latest_at_or_before(rows);
    if (rows == from.n_past_) {
      for (size_t l : delta_layers_) src.push_back(from.live(l));
      copy_state(to, src);
    } else if (cp != nullptr && cp->pos == rows) {
      copy_state(to, cp->layers);
    } else {
      zero_state();
    }
  }
  n_past_ = rows;
  checkpoint();
  return rows;
}

}  // namespace ts
