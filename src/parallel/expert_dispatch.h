// Expert parallelism's dispatch and combine for one MoE layer's pass (docs/PARALLEL.md). Each
// token has a home rank (where its hidden state is and where its output is summed); each routed
// expert an owner (ExpertPlacement). Dispatch sends a token's row once to every rank that owns one
// of its experts; the owner runs each expert over its rows (all of the pass's tokens routed to it,
// in token order: the rows and row count one rank would give it); combine sends each (token,
// expert) output back home, where the k outputs are summed by weight in f32 in the order one rank
// sums them (ascending expert id, Backend::scatter_add_rows from zero). So the output is
// bit-identical to one rank's.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "parallel/communicator.h"
#include "parallel/partition.h"

namespace ts {

// Rank r is home to rows [homes[r], homes[r + 1]) of an M-row micro-batch: contiguous runs, the
// first M % ranks ranks one row more.
std::vector<int64_t> contiguous_homes(int64_t M, int ranks);

// One rank's plan for one pass, from the whole micro-batch's routing (every rank knows it: the
// router runs on replicated rows, or its ids and weights are gathered first).
struct ExpertDispatch {
  int64_t home_rows = 0;  // this rank's tokens
  // Dispatch: the home rows sent, in order of destination rank (tokens ascending for each), as
  // indices into this rank's home rows; rows received arrive in token order.
  std::vector<int32_t> send_src;
  RowExchange dispatch;
  int64_t recv_rows = 0;
  // This rank's expert rows, expert-major (experts ascending, tokens ascending within each), as
  // indices into the rows received; the groups: expert id, first row, row count.
  std::vector<int32_t> expert_src;
  std::vector<int32_t> group_expert;
  std::vector<int64_t> group_row0, group_rows;
  // Combine: the expert rows sent back, in order of home rank (expert-major within each), as
  // indices into the expert rows.
  std::vector<int32_t> return_src;
  RowExchange combine;
  int64_t returned_rows = 0;
  // The home tokens' k outputs in the order they are summed (experts ascending, tokens ascending
  // within each): index into the rows received back, home row, routing weight.
  std::vector<int32_t> sum_src, sum_token;
  std::vector<float> sum_scale;
};

// ids and weights: [M][k] routing of the whole micro-batch (host memory).
ExpertDispatch plan_expert_dispatch(const int32_t* ids, const float* weights, int64_t M, int64_t k,
                                    const ExpertPlacement& place, const std::vector<int64_t>& homes,
                                    int rank);

// Runs groups of this rank's experts over expert-major rows x into y (rows of `width`): group g is
// expert ids[g] over rows [row0[g], row0[g] + rows[g]).
using ExpertGroupsFn =
    std::function<void(const int32_t* ids, const int64_t* row0, const int64_t* rows, int64_t G)>;

// Backend memory for the exchanges of passes of at most max_rows tokens, k experts each.
class ExpertExchangeBuffers {
 public:
  ExpertExchangeBuffers(Backend& b, int64_t max_rows, int64_t k, int64_t width);
  ~ExpertExchangeBuffers();
  ExpertExchangeBuffers(const ExpertExchangeBuffers&) = delete;
  ExpertExchangeBuffers& operator=(const ExpertExchangeBuffers&) = delete;
  float* send = nullptr;   // max_rows * k rows
  float* recv = nullptr;   // max_rows * k rows
  float* order = nullptr;  // max_rows * k rows

 private:
  Backend& b_;
};

// One rank's pass: home rows h ([d.home_rows][width]) dispatched, `experts` run over x (the
// gathered rows) into y, outputs combined into out ([d.home_rows][width]). x and y hold
// max_rows * k rows (the MoE FFN's gathered rows and expert outputs).
void run_expert_dispatch(Backend& b, Communicator& comm, const ExpertDispatch& d, const float* h,
                         int64_t width, ExpertExchangeBuffers& buf, float* x, float* y,
                         const ExpertGroupsFn& experts, float* out);

}  // namespace ts
