// The eviction policies on hand-made use patterns: which slot each would give up.
#include <gtest/gtest.h>

#include "moe/cache_policy.h"

namespace ts {
namespace {

// Three slots hold experts 0, 1, 2; expert 0 is used five times first, then 1 and 2 once each.
std::unique_ptr<CachePolicy> warmed(CachePolicyKind kind) {
  auto p = make_cache_policy(kind, 3, 8);
  for (int32_t e = 0; e < 3; ++e) p->filled(e, e);
  for (int i = 0; i < 4; ++i) p->touch(0, 0);
  p->touch(1, 1);
  p->touch(2, 2);
  return p;
}

TEST(CachePolicy, LruEvictsTheLeastRecent) {
  EXPECT_EQ(0, warmed(CachePolicyKind::Lru)->victim({0, 0, 0}));
}

// Expert 0's uses outweigh its age: the least recent of the others goes.
TEST(CachePolicy, FrequencyWeightedLruKeepsAnOftenUsedExpert) {
  EXPECT_EQ(1, warmed(CachePolicyKind::Flru)->victim({0, 0, 0}));
  EXPECT_EQ(2, warmed(CachePolicyKind::Flru)->victim({0, 1, 0}));
}

// Once an expert used once has been used again more recently than the frequent one by more than
// its uses are worth, it ages out like LRU.
TEST(CachePolicy, FrequencyWeightedLruStillAges) {
  auto p = warmed(CachePolicyKind::Flru);
  for (int i = 0; i < 12; ++i) {
    p->touch(1, 1);
    p->touch(2, 2);
  }
  EXPECT_EQ(0, p->victim({0, 0, 0}));
}

TEST(CachePolicy, NamesRoundTrip) {
  for (auto k : {CachePolicyKind::Lru, CachePolicyKind::Lfu, CachePolicyKind::Flru})
    EXPECT_EQ(k, cache_policy_from_name(cache_policy_name(k)));
}

}  // namespace
}  // namespace ts
