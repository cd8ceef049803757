#include "moe/cache_policy.h"

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
// comes back keeps its history.
class LfuPolicy final : public CachePolicy {
 public:
  LfuPolicy(int64_t slots, int64_t n_expert)
      : count_(static_cast<size_t>(n_expert), 0),
        slot_expert_(static_cast<size_t>(slots), -1),
        last_(static_cast<size_t>(slots), 0) {}
  void touch(int64_t slot, int32_t e) override {
    count_[static_cast<size_t>(e)]++;
    last_[static_cast<size_t>(slot)] = ++clock_;
  }
  void filled(int64_t slot, int32_t e) override {
    slot_expert_[static_cast<size_t>(slot)] = e;
    touch(slot, e);
  }
  int64_t victim(const std::vector<uint8_t>& pinned) const override {
    int64_t best = -1;
    auto uses = [&](size_t s) {
      return slot_expert_[s] < 0 ? 0 : count_[static_cast<size_t>(slot_expert_[s])];
    };
    for (size_t s = 0; s < slot_expert_.size(); ++s) {
      if (pinned[s]) continue;
      const auto b = static_cast<size_t>(best);
      if (best < 0 || uses(s) < uses(b) || (uses(s) == uses(b) && last_[s] < last_[b]))
        best = static_cast<int64_t>(s);
    }
    return best;
  }

 private:
  std::vector<uint64_t> count_;
  std::vector<int32_t> slot_expert_;
  std::vector<uint64_t> last_;
  uint64_t clock_ = 0;
};

}  // namespace

CachePolicyKind cache_policy_from_name(const std::string& name) {
  if (name == "lru") return CachePolicyKind::Lru;
  if (name == "lfu") return CachePolicyKind::Lfu;
  fail(ErrorKind::Usage, "unknown cache policy '" + name + "' (lru, lfu)");
}

const char* cache_policy_name(CachePolicyKind k) {
  return k == CachePolicyKind::Lru ? "lru" : "lfu";
}

std::unique_ptr<CachePolicy> make_cache_policy(CachePolicyKind kind, int64_t slots,
                                               int64_t n_expert) {
  if (kind == CachePolicyKind::Lfu) return std::make_unique<LfuPolicy>(slots, n_expert);
  return std::make_unique<LruPolicy>(slots);
}

}  // namespace ts
