// Which expert slot to evict. LRU evicts the least recently used; LFU the least often used
// (ties: least recent); frequency-weighted LRU the least recently used once each expert's past
// uses have lengthened its stay. All are per layer and never evict an expert the current step
// needs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ts {

enum class CachePolicyKind { Lru, Lfu, Flru };
CachePolicyKind cache_policy_from_name(const std::string& name);
const char* cache_policy_name(CachePolicyKind k);

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  virtual void touch(int64_t slot, int32_t expert) = 0;   // the slot's expert was used
  virtual void filled(int64_t slot, int32_t expert) = 0;  // a new expert was read into the slot
  // The slot to evict among those with pinned[slot] == 0.
  virtual int64_t victim(const std::vector<uint8_t>& pinned) const = 0;
};

std::unique_ptr<CachePolicy> make_cache_policy(CachePolicyKind kind, int64_t slots,
                                               int64_t n_expert);

}  // namespace ts
