#include "parallel/partition.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/error.h"

namespace ts {
namespace {

[[noreturn]] void refuse(const std::string& flag, int ranks, const std::string& why) {
  fail(ErrorKind::Unsupported, flag + " " + std::to_string(ranks) + ": " + why);
}

void check_ranks(const std::string& flag, int ranks) {
  if (ranks < 1) fail(ErrorKind::Usage, flag + " must be at least 1, not " + std::to_string(ranks));
}

}  // namespace

TensorPlan plan_tensor_parallel(const TensorParallelShape& s, int ranks, KvHeadPolicy kv) {
  const std::string flag = "--tensor-parallel";
  check_ranks(flag, ranks);
  const auto N = static_cast<int64_t>(ranks);
  const auto str = [](int64_t v) { return std::to_string(v); };
  TensorPlan p;
  p.ranks = ranks;
  int64_t heads = 0, kv_heads = 0, group = 1;
  if (s.n_head > 0) {
    if (s.n_head % N != 0)
      refuse(flag, ranks,
             str(s.n_head) + " attention heads do not split evenly over " + str(N) + " ranks");
    if (s.n_head_kv < 1 || s.n_head % s.n_head_kv != 0)
      refuse(
          flag, ranks,
          str(s.n_head) + " attention heads do not group over " + str(s.n_head_kv) + " kv heads");
    p.kv_replicated = s.n_head_kv < N;
    if (!p.kv_replicated && s.n_head_kv % N != 0)
      refuse(flag, ranks,
             str(s.n_head_kv) + " kv heads do not split evenly over " + str(N) + " ranks");
    if (p.kv_replicated && kv == KvHeadPolicy::Refuse)
      refuse(flag, ranks,
             str(s.n_head_kv) + " kv heads are fewer than " + str(N) +
                 " ranks (replicating them is not allowed here)");
    if (p.kv_replicated && N % s.n_head_kv != 0)
      refuse(flag, ranks,
             str(s.n_head_kv) + " kv heads cannot be replicated evenly over " + str(N) + " ranks");
    heads = s.n_head / N;
    kv_heads = p.kv_replicated ? 1 : s.n_head_kv / N;
    // q head h reads kv head h / group: a rank's heads read its kv heads only.
    group = s.n_head / s.n_head_kv;
    if (heads * s.head_dim % s.block_elems != 0)
      refuse(flag, ranks,
             "each rank's " + str(heads) + " heads x " + str(s.head_dim) +
                 " columns of the attention output are not whole blocks of " + str(s.block_elems));
  }
  if (s.n_ff % N != 0)
    refuse(flag, ranks,
           "the FFN's " + str(s.n_ff) + " columns do not split evenly over " + str(N) + " ranks");
  const int64_t ffs = s.n_ff / N;
  if (ffs % s.block_elems != 0)
    refuse(
        flag, ranks,
        "each rank's " + str(ffs) + " FFN columns are not whole blocks of " + str(s.block_elems));
  for (int64_t r = 0; r < N; ++r)
    p.slice.push_back({.head0 = r * heads,
                       .heads = heads,
                       .kv_head0 = r * heads / group,
                       .kv_heads = kv_heads,
                       .ff0 = r * ffs,
                       .ffs = ffs});
  return p;
}

namespace {

ExpertPlacement placement_of(std::vector<int32_t> owner, int ranks) {
  ExpertPlacement p;
  p.ranks = ranks;
  p.experts.resize(static_cast<size_t>(ranks));
  for (size_t e = 0; e < owner.size(); ++e)
    p.experts[static_cast<size_t>(owner[e])].push_back(static_cast<int32_t>(e));
  p.owner = std::move(owner);
  return p;
}

void check_experts(int64_t n_expert, int ranks) {
  const std::string flag = "--expert-parallel";
  check_ranks(flag, ranks);
  if (n_expert < ranks)
    refuse(flag, ranks,
           std::to_string(n_expert) + " routed experts cannot give each of " +
               std::to_string(ranks) + " ranks one");
}

}  // namespace

ExpertPlacement place_experts_contiguous(int64_t n_expert, int ranks) {
  check_experts(n_expert, ranks);
  std::vector<int32_t> owner;
  const int64_t base = n_expert / ranks, extra = n_expert % ranks;
  for (int32_t r = 0; r < ranks; ++r)
    owner.insert(owner.end(), static_cast<size_t>(base + (r < extra ? 1 : 0)), r);
  return placement_of(std::move(owner), ranks);
}

ExpertPlacement place_experts_balanced(const std::vector<double>& load, int ranks) {
  const auto E = static_cast<int64_t>(load.size());
  check_experts(E, ranks);
  std::vector<int32_t> order(load.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return load[static_cast<size_t>(a)] > load[static_cast<size_t>(b)];
  });
  const int64_t cap = (E + ranks - 1) / ranks;
  std::vector<double> sum(static_cast<size_t>(ranks), 0);
  std::vector<int64_t> count(static_cast<size_t>(ranks), 0);
  std::vector<int32_t> owner(load.size(), -1);
  for (int32_t e : order) {
    int best = -1;
    for (int r = 0; r < ranks; ++r) {
      const auto ri = static_cast<size_t>(r);
      if (count[ri] < cap && (best < 0 || sum[ri] < sum[static_cast<size_t>(best)])) best = r;
    }
    const auto bi = static_cast<size_t>(best);
    owner[static_cast<size_t>(e)] = best;
    sum[bi] += load[static_cast<size_t>(e)];
    count[bi]++;
  }
  return placement_of(std::move(owner), ranks);
}

int64_t rank_expert_slots(int rank, int64_t owned, int64_t k, uint64_t budget_bytes,
                          uint64_t expert_bytes, int64_t n_moe_layers) {
  const uint64_t per_layer =
      expert_bytes * static_cast<uint64_t>(std::max<int64_t>(n_moe_layers, 1));
  const auto fits = static_cast<int64_t>(per_layer == 0 ? owned : budget_bytes / per_layer);
  if (fits >= owned) return owned;
  const int64_t need = std::min(k, owned);
  if (fits < need)
    fail(ErrorKind::Budget,
         "--expert-parallel: rank " + std::to_string(rank) + "'s budget of " +
             std::to_string(budget_bytes) + " bytes holds " + std::to_string(fits) +
             " expert slots a layer; a token can route to " + std::to_string(need) + " of its " +
             std::to_string(owned) + " experts");
  return fits;
}

}  // namespace ts
