// The partition planner (heads, kv heads, FFN columns, experts per rank, each rank's expert slots)
// with its named refusals; the thread communicator's collectives; the expert dispatch plan's
// bookkeeping (every routed pair computed once, on its expert's owner, and summed at its home).
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "core/error.h"
#include "parallel/expert_dispatch.h"
#include "parallel/partition.h"
#include "parallel/thread_communicator.h"
#include "parallel_cases.h"

namespace ts {
namespace {

using test::expect_error;

TEST(TensorPlan, SplitsHeadsKvHeadsAndFfnColumns) {
  // Llama-3-8B's shape over 4 ranks.
  const TensorPlan p = plan_tensor_parallel(
      {.n_head = 32, .n_head_kv = 8, .head_dim = 128, .n_ff = 14336, .block_elems = 256}, 4,
      KvHeadPolicy::Refuse);
  ASSERT_EQ(p.slice.size(), 4u);
  EXPECT_FALSE(p.kv_replicated);
  for (int64_t r = 0; r < 4; ++r) {
    const RankSlice& s = p.slice[static_cast<size_t>(r)];
    EXPECT_EQ(s.head0, 8 * r);
    EXPECT_EQ(s.heads, 8);
    EXPECT_EQ(s.kv_head0, 2 * r);
    EXPECT_EQ(s.kv_heads, 2);
    EXPECT_EQ(s.ff0, 3584 * r);
    EXPECT_EQ(s.ffs, 3584);
  }
}

TEST(TensorPlan, ReplicatesKvHeadsFewerThanRanks) {
  // 8 q heads over 2 kv heads on 4 ranks: ranks 0-1 hold kv head 0, ranks 2-3 kv head 1.
  const TensorPlan p = plan_tensor_parallel({.n_head = 8, .n_head_kv = 2, .head_dim = 64}, 4,
                                            KvHeadPolicy::Replicate);
  EXPECT_TRUE(p.kv_replicated);
  const std::vector<int64_t> kv0{0, 0, 1, 1};
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(p.slice[r].heads, 2);
    EXPECT_EQ(p.slice[r].kv_head0, kv0[r]);
    EXPECT_EQ(p.slice[r].kv_heads, 1);
    // Every q head of the rank reads the kv head it holds (h / (n_head / n_head_kv)).
    for (int64_t h = p.slice[r].head0; h < p.slice[r].head0 + p.slice[r].heads; ++h)
      EXPECT_EQ(h / 4, p.slice[r].kv_head0);
  }
}

TEST(TensorPlan, RefusesWhatDoesNotSplit) {
  const auto plan = [](TensorParallelShape s, int ranks, KvHeadPolicy kv) {
    return [=] { plan_tensor_parallel(s, ranks, kv); };
  };
  const auto R = KvHeadPolicy::Replicate;
  expect_error(plan({.n_head = 32, .n_head_kv = 8, .head_dim = 128}, 3, R), ErrorKind::Unsupported,
               "--tensor-parallel 3: 32 attention heads do not split");
  expect_error(plan({.n_head = 12, .n_head_kv = 6, .head_dim = 64}, 4, R), ErrorKind::Unsupported,
               "6 kv heads do not split evenly over 4 ranks");
  expect_error(plan({.n_head = 16, .n_head_kv = 2, .head_dim = 64}, 8, KvHeadPolicy::Refuse),
               ErrorKind::Unsupported, "2 kv heads are fewer than 8 ranks");
  expect_error(plan({.n_head = 24, .n_head_kv = 4, .head_dim = 64}, 6, R), ErrorKind::Unsupported,
               "4 kv heads cannot be replicated evenly over 6 ranks");
  expect_error(plan({.n_head = 8, .n_head_kv = 8, .head_dim = 64, .block_elems = 256}, 8, R),
               ErrorKind::Unsupported, "64 columns of the attention output are not whole blocks");
  expect_error(plan({.n_ff = 1000}, 3, R), ErrorKind::Unsupported,
               "the FFN's 1000 columns do not split evenly over 3 ranks");
  expect_error(plan({.n_ff = 1536, .block_elems = 256}, 4, R), ErrorKind::Unsupported,
               "each rank's 384 FFN columns are not whole blocks of 256");
  expect_error(plan({.n_ff = 64}, 0, R), ErrorKind::Usage, "--tensor-parallel must be at least 1");
}

TEST(ExpertPlacement, ContiguousRuns) {
  const ExpertPlacement p = place_experts_contiguous(10, 4);
  EXPECT_EQ(p.owner, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(p.experts[1], (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(p.experts[3], (std::vector<int32_t>{8, 9}));
  expect_error([] { place_experts_contiguous(2, 4); }, ErrorKind::Unsupported,
               "--expert-parallel 4: 2 routed experts cannot give each of 4 ranks one");
}

TEST(ExpertPlacement, BalancedByLoad) {
  // Two hot experts land on different ranks; every rank holds E / N experts.
  std::vector<double> load(8, 1.0);
  load[2] = 10;
  load[3] = 9;
  const ExpertPlacement p = place_experts_balanced(load, 2);
  EXPECT_NE(p.owner[2], p.owner[3]);
  double sum[2] = {0, 0};
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(p.experts[r].size(), 4u);
    EXPECT_TRUE(std::is_sorted(p.experts[r].begin(), p.experts[r].end()));
    for (int32_t e : p.experts[r]) sum[r] += load[static_cast<size_t>(e)];
  }
  EXPECT_EQ(sum[0], 13);
  EXPECT_EQ(sum[1], 12);
  EXPECT_EQ(place_experts_balanced(load, 2).owner, p.owner);  // deterministic
}

TEST(ExpertPlacement, EachRankSlotsFromItsOwnBudget) {
  // 32 experts of 1 MiB on 4 layers: a budget of 40 MiB holds 10 slots a layer.
  const uint64_t MiB = 1 << 20;
  EXPECT_EQ(rank_expert_slots(1, 32, 8, 40 * MiB, MiB, 4), 10);
  EXPECT_EQ(rank_expert_slots(1, 32, 8, 1024 * MiB, MiB, 4), 32);  // all resident
  EXPECT_EQ(rank_expert_slots(1, 4, 8, 16 * MiB, MiB, 4), 4);      // owns fewer than k
  expect_error([&] { rank_expert_slots(3, 32, 8, 20 * MiB, MiB, 4); }, ErrorKind::Budget,
               "rank 3's budget of 20971520 bytes holds 5 expert slots a layer; a token can route "
               "to 8 of its 32 experts");
}

TEST(ThreadCommunicator, AllReduceAndExchange) {
  const int N = 3;
  std::vector<std::vector<float>> got(N);
  run_ranks(make_thread_communicators(N), [&](Communicator& c) {
    got[static_cast<size_t>(c.rank())] = test::collectives_round(c, nullptr);
  });
  // The sums, then rank 0's one row, rank 1's two and rank 2's three: (sender, row).
  for (int r = 0; r < N; ++r)
    EXPECT_EQ(got[static_cast<size_t>(r)],
              (std::vector<float>{6, 30, 1.5f, 0, 0, 1, 0, 1, 1, 2, 0, 2, 1, 2, 2}));
}

TEST(ThreadCommunicator, MismatchedCountsFailOnEveryRank) {
  const auto comms = make_thread_communicators(2);
  expect_error(
      [&] {
        run_ranks(comms, [&](Communicator& c) {
          std::vector<float> buf(8);
          // Rank 1 expects 2 rows from rank 0, which sends 1.
          const RowExchange x{{0, 0}, {1, 1}, {0, 2}, {c.rank() == 1 ? 2 : 1, 1}};
          c.exchange_rows(buf.data(), buf.data() + 4, 1, x);
        });
      },
      ErrorKind::Runtime, "rank 0 sends 1 rows to rank 1, which expects 2");
}

// Every routed pair is computed on its expert's owner exactly once, and each home sums its
// tokens' k outputs (ascending expert id) with their weights.
TEST(ExpertDispatch, EveryPairOnceOnItsOwnerSummedAtHome) {
  const int64_t M = 13, k = 3, E = 8;
  std::mt19937 gen(7);
  std::vector<int32_t> ids;
  std::vector<float> w;
  for (int64_t t = 0; t < M; ++t) {
    std::vector<int32_t> e(E);
    std::iota(e.begin(), e.end(), 0);
    std::shuffle(e.begin(), e.end(), gen);
    ids.insert(ids.end(), e.begin(), e.begin() + k);
    for (int64_t i = 0; i < k; ++i) w.push_back(float(t * k + i));
  }
  for (int N : {1, 2, 3, 4}) {
    const ExpertPlacement place = place_experts_contiguous(E, N);
    const std::vector<int64_t> homes = contiguous_homes(M, N);
    std::vector<int64_t> computed(static_cast<size_t>(M * E), 0);
    int64_t summed = 0;
    for (int r = 0; r < N; ++r) {
      const ExpertDispatch d = plan_expert_dispatch(ids.data(), w.data(), M, k, place, homes, r);
      EXPECT_EQ(d.home_rows, homes[static_cast<size_t>(r) + 1] - homes[static_cast<size_t>(r)]);
      for (size_t g = 0; g < d.group_expert.size(); ++g) {
        EXPECT_EQ(place.owner[static_cast<size_t>(d.group_expert[g])], r);
        computed[static_cast<size_t>(d.group_expert[g])] += d.group_rows[g];
      }
      ASSERT_EQ(d.sum_src.size(), static_cast<size_t>(d.home_rows * k));
      for (size_t j = 0; j < d.sum_src.size(); ++j) {
        const int64_t t = homes[static_cast<size_t>(r)] + d.sum_token[j];
        bool routed = false;
        for (int64_t i = 0; i < k; ++i)
          routed = routed || w[static_cast<size_t>(t * k + i)] == d.sum_scale[j];
        EXPECT_TRUE(routed);
      }
      summed += static_cast<int64_t>(d.sum_src.size());
    }
    for (int64_t e = 0; e < E; ++e)
      EXPECT_EQ(computed[static_cast<size_t>(e)], std::count(ids.begin(), ids.end(), e));
    EXPECT_EQ(summed, M * k);
  }
}

}  // namespace
}  // namespace ts
