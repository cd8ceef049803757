// One sequence's KV cache: every layer's keys and values for `ctx` positions, allocated whole at
// creation (its size is part of the announced footprint), and how many positions are filled.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace ts {

class Engine;

class KvCache {
 public:
  KvCache(Engine& engine, int64_t ctx);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvView& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }
  // Makes this cache's first `rows` rows those of `from` (of the same engine) and n_past `rows`:
  // a sequence that starts like another's takes its rows instead of computing them again.
  void copy_rows_from(const KvCache& from, int64_t rows);
  int64_t ctx() const { return ctx_; }
  uint64_t bytes() const { return bytes_; }
  int64_t n_past = 0;  // filled positions

 private:
  Backend& backend_;
  int64_t ctx_;
  uint64_t bytes_ = 0;
  std::vector<KvView> layers_;
};

}  // namespace ts
