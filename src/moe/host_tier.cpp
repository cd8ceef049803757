#include "moe/host_tier.h"

namespace ts {

HostTier::HostTier(Backend& backend, int64_t entries, uint64_t entry_bytes, int64_t n_layer,
                   int64_t n_expert, bool cache)
    : backend_(backend), entries_(static_cast<size_t>(entries)), n_expert_(n_expert) {
  for (Entry& e : entries_)
    e.memory = static_cast<uint8_t*>(backend.alloc_host_pinned(entry_bytes));
  if (cache) where_.assign(static_cast<size_t>(n_layer * n_expert), -1);
}

HostTier::~HostTier() {
  for (Entry& e : entries_) backend_.free_host_pinned(e.memory);
}

int64_t HostTier::find(int64_t layer, int32_t expert) const {
  if (where_.empty()) return -1;
  return where_[static_cast<size_t>(layer * n_expert_ + expert)];
}

void HostTier::touch(int64_t entry) {
  entries_[static_cast<size_t>(entry)].last_use = ++clock_;
}

int64_t HostTier::victim(const std::vector<int64_t>& wave_user) const {
  int64_t best = -1;
  bool best_busy = true;
  for (size_t e = 0; e < entries_.size(); ++e) {
    const bool busy = wave_user[e] >= 0;
    if (best < 0 || (best_busy && !busy) ||
        (busy == best_busy &&
         entries_[e].last_use < entries_[static_cast<size_t>(best)].last_use)) {
      best = static_cast<int64_t>(e);
      best_busy = busy;
    }
  }
  return best;
}

void HostTier::assign(int64_t entry, int64_t layer, int32_t expert) {
  Entry& e = entries_[static_cast<size_t>(entry)];
  if (where_.empty()) return;
  if (e.key >= 0) where_[static_cast<size_t>(e.key)] = -1;
  e.key = layer * n_expert_ + expert;
  where_[static_cast<size_t>(e.key)] = entry;
}

void HostTier::drop(int64_t layer, int32_t expert) {
  const int64_t entry = find(layer, expert);
  if (entry < 0) return;
  entries_[static_cast<size_t>(entry)].key = -1;
  where_[static_cast<size_t>(layer * n_expert_ + expert)] = -1;
}

}  // namespace ts
