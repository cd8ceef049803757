#include "moe/expert_parallel_ffn.h"

#include <cstring>

#include "core/error.h"

namespace ts {

ExpertParallelFfn::ExpertParallelFfn(Backend& b, const ArchConfig& c, MoeFfn& moe,
                                     const FfnBuffers& buffers, Communicator& comm,
                                     ExpertPlacement place, int64_t max_rows)
    : b_(b),
      c_(c),
      moe_(moe),
      buf_(buffers),
      comm_(comm),
      place_(std::move(place)),
      exchange_(b, max_rows, c.n_expert_used, c.n_embd) {
  if (place_.ranks != comm_.size() || static_cast<int64_t>(place_.owner.size()) != c_.n_expert)
    fail(ErrorKind::Usage, "--expert-parallel: a placement of " +
                               std::to_string(place_.owner.size()) + " experts over " +
                               std::to_string(place_.ranks) + " ranks for a model of " +
                               std::to_string(c_.n_expert) + " experts on " +
                               std::to_string(comm_.size()) + " ranks");
  home_out_ =
      static_cast<float*>(b_.alloc(static_cast<size_t>(max_rows * c_.n_embd) * sizeof(float)));
}

ExpertParallelFfn::~ExpertParallelFfn() {
  b_.free(home_out_);
}

void ExpertParallelFfn::run(int64_t l, const float* h, int64_t M, float* out) {
  const int64_t d = c_.n_embd, k = c_.n_expert_used;
  routing_host_.resize(static_cast<size_t>(2 * M * k));
  b_.to_host(routing_host_.data(), moe_.routing(), routing_host_.size() * sizeof(float));
  std::vector<int32_t> ids(static_cast<size_t>(M * k));
  std::memcpy(ids.data(), routing_host_.data(), ids.size() * sizeof(int32_t));
  const int N = comm_.size(), me = comm_.rank();
  const std::vector<int64_t> homes = contiguous_homes(M, N);
  const ExpertDispatch plan =
      plan_expert_dispatch(ids.data(), routing_host_.data() + M * k, M, k, place_, homes, me);
  run_expert_dispatch(
      b_, comm_, plan, h + homes[static_cast<size_t>(me)] * d, d, exchange_, buf_.rows, buf_.out,
      [&](const int32_t* e, const int64_t* row0, const int64_t* rows, int64_t G) {
        moe_.run_expert_groups(l, e, row0, rows, G);
      },
      home_out_);
  // Every rank's home rows to every rank: the next layer's rows are the same everywhere.
  RowExchange all;
  for (int p = 0; p < N; ++p) {
    const auto pi = static_cast<size_t>(p);
    all.send_row0.push_back(0);
    all.send_rows.push_back(plan.home_rows);
    all.recv_row0.push_back(homes[pi]);
    all.recv_rows.push_back(homes[pi + 1] - homes[pi]);
  }
  comm_.exchange_rows(home_out_, out, d, all);
  moe_.shared_expert(l, h, M, out);
}

}  // namespace ts
