#include "moe/cache_policy.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace ts {
namespace {

class LruPolicy final : public CachePolicy {
 public:
  explicit LruPolicy(int64_t slots) : last_(static_cast<size_t>(slots), 0) {}
  void touch(int64_t slot, int32_t) override { last_[static_cast<size_t>(slot)] = ++clock_; }
  void filled(int64_t slot, int32_t e) override { touch(slot, e); }
  int64_t victim(const std::vector<uint8_t>& pinned) const override {
    int64_t best = -1;
    for (size_t s = 0; s < last_.size(); ++s)
      if (!pinned[s] && (best < 0 || last_[s] < last_[static_cast<size_t>(best)]))
        best = static_cast<int64_t>(s);
    return best;
  }

 private:
  std::vector<uint64_t> last_;
  uint64_t clock_ = 0;
};

// Counts uses per expert over the whole run (not per slot), so an expert that was evicted and
// comes back keeps its history; and each slot's last use.
class CountingPolicy : public CachePolicy {
 public:
  CountingPolicy(int64_t slots, int64_t n_expert, uint64_t cap)
      : count_(static_cast<size_t>(n_expert), 0),
        slot_expert_(static_cast<size_t>(slots), -1),
        last_(static_cast<size_t>(slots), 0),
        cap_(cap) {}
  void touch(int64_t slot, int32_t e) override {
    uint64_t& c = count_[static_cast<size_t>(e)];
    c = std::min(c + 1, cap_);
    last_[static_cast<size_t>(slot)] = ++clock_;
  }
  void filled(int64_t slot, int32_t e) override {
    slot_expert_[static_cast<size_t>(slot)] = e;
    touch(slot, e);
  }

 protected:
  uint64_t uses(size_t s) const {
    return slot_expert_[s] < 0 ? 0 : count_[static_cast<size_t>(slot_expert_[s])];
  }
  std::vector<uint64_t> count_;
  std::vector<int32_t> slot_expert_;
  std::vector<uint64_t> last_;

 private:
  uint64_t cap_;
  uint64_t clock_ = 0;
};

// The least often used (ties: least recent).
class LfuPolicy final : public CountingPolicy {
 public:
  LfuPolicy(int64_t slots, int64_t n_expert)
      : CountingPolicy(slots, n_expert, std::numeric_limits<uint64_t>::max()) {}
  int64_t victim(const std::vector<uint8_t>& pinned) const override {
    int64_t best = -1;
    for (size_t s = 0; s < slot_expert_.size(); ++s) {
      if (pinned[s]) continue;
      const auto b = static_cast<size_t>(best);
      if (best < 0 || uses(s) < uses(b) || (uses(s) == uses(b) && last_[s] < last_[b]))
        best = static_cast<int64_t>(s);
    }
    return best;
  }
};

// LRU on a clock of uses where a slot counts as used later by one pass over the slots per earlier
// use of its expert (capped): an expert routed often survives a burst of one-off experts that
// plain LRU would let push it out, and one routed once ages like LRU.
class FrequencyLruPolicy final : public CountingPolicy {
 public:
  FrequencyLruPolicy(int64_t slots, int64_t n_expert)
      : CountingPolicy(slots, n_expert, kCap), bonus_(static_cast<uint64_t>(slots)) {}
  int64_t victim(const std::vector<uint8_t>& pinned) const override {
    int64_t best = -1;
    uint64_t best_score = 0;
    for (size_t s = 0; s < slot_expert_.size(); ++s) {
      if (pinned[s]) continue;
      const uint64_t score = last_[s] + (uses(s) > 0 ? bonus_ * (uses(s) - 1) : 0);
      if (best < 0 || score < best_score) {
        best = static_cast<int64_t>(s);
        best_score = score;
      }
    }
    return best;
  }

 private:
  static constexpr uint64_t kCap = 8;
  uint64_t bonus_;
};

}  // namespace

CachePolicyKind cache_policy_from_name(const std::string& name) {
  if (name == "lru") return CachePolicyKind::Lru;
  if (name == "lfu") return CachePolicyKind::Lfu;
  if (name == "flru") return CachePolicyKind::Flru;
  fail(ErrorKind::Usage, "unknown cache policy '" + name + "' (lru, lfu, flru)");
}

const char* cache_policy_name(CachePolicyKind k) {
  return k == CachePolicyKind::Lru ? "lru" : k == CachePolicyKind::Lfu ? "lfu" : "flru";
}

std::unique_ptr<CachePolicy> make_cache_policy(CachePolicyKind kind, int64_t slots,
                                               int64_t n_expert) {
  if (kind == CachePolicyKind::Lfu) return std::make_unique<LfuPolicy>(slots, n_expert);
  if (kind == CachePolicyKind::Flru) return std::make_unique<FrequencyLruPolicy>(slots, n_expert);
  return std::make_unique<LruPolicy>(slots);
}

}  // namespace ts
