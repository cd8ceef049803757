// Pinned host memory between the model file and the VRAM slots of a device backend: entries of
// one expert each, laid out exactly as a slot, so that one host-to-device copy moves an entry to
// its slot. With a RAM budget (--ram-budget) the entries are a cache shared by every layer, keyed
// by (layer, expert) and evicted least recently used: a VRAM miss found here costs no file read.
// Without one they are only the staging buffers the reads land in, and remember nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace ts {

class HostTier {
 public:
  // `cache`: remember what each entry holds (a RAM tier) rather than just stage reads.
  HostTier(Backend& backend, int64_t entries, uint64_t entry_bytes, int64_t n_layer,
           int64_t n_expert, bool cache);
  ~HostTier();
  HostTier(const HostTier&) = delete;
  HostTier& operator=(const HostTier&) = delete;

  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }
  // The entry holding the expert, or -1 (always -1 when the tier does not cache).
  int64_t find(int64_t layer, int32_t expert) const;
  void touch(int64_t entry);
  // The entry to read the next expert into. `wave_user[e]` >= 0 marks an entry the current wave
  // of reads still copies from: the least recently used of the others, else the least recently
  // used of all (whose new read must then wait until the copy of its wave user is queued).
  int64_t victim(const std::vector<int64_t>& wave_user) const;
  // The entry now holds (is being filled with) the expert; what it held before is forgotten.
  void assign(int64_t entry, int64_t layer, int32_t expert);
  // Forgets the expert if an entry holds it (its read failed or never ran).
  void drop(int64_t layer, int32_t expert);
  uint8_t* memory(int64_t entry) const { return entries_[static_cast<size_t>(entry)].memory; }
  // The last async copy out of the entry: a read into it waits for this ticket first.
  uint64_t last_copy(int64_t entry) const { return entries_[static_cast<size_t>(entry)].copy; }
  void set_last_copy(int64_t entry, uint64_t ticket) {
    entries_[static_cast<size_t>(entry)].copy = ticket;
  }

 private:
  struct Entry {
    uint8_t* memory = nullptr;
    int64_t key = -1;  // layer * n_expert + expert; -1: holds nothing
    uint64_t last_use = 0;
    uint64_t copy = 0;
  };
  Backend& backend_;
  std::vector<Entry> entries_;
  std::vector<int64_t> where_;  // per key: the entry holding it, or -1; empty when not caching
  int64_t n_expert_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace ts
