#include "parallel/expert_dispatch.h"

#include "core/error.h"

namespace ts {

std::vector<int64_t> contiguous_homes(int64_t M, int ranks) {
  std::vector<int64_t> homes{0};
  for (int r = 0; r < ranks; ++r)
    homes.push_back(homes.back() + M / ranks + (r < M % ranks ? 1 : 0));
  return homes;
}

ExpertDispatch plan_expert_dispatch(const int32_t* ids, const float* weights, int64_t M, int64_t k,
                                    const ExpertPlacement& place, const std::vector<int64_t>& homes,
                                    int rank) {
  const int N = place.ranks;
  const auto E = static_cast<int64_t>(place.owner.size());
  if (static_cast<int>(homes.size()) != N + 1 || homes.front() != 0 || homes.back() != M)
    fail(ErrorKind::Runtime, "internal: the token homes do not cover the micro-batch's " +
                                 std::to_string(M) + " rows over " + std::to_string(N) + " ranks");
  for (int64_t i = 0; i < M * k; ++i)
    if (ids[i] < 0 || ids[i] >= E)
      fail(ErrorKind::Runtime,
           "internal: routed to expert " + std::to_string(ids[i]) + " of " + std::to_string(E));
  const auto me = static_cast<size_t>(rank);
  const auto owner = [&](int64_t t, int64_t i) {
    return static_cast<size_t>(place.owner[static_cast<size_t>(ids[t * k + i])]);
  };
  std::vector<int32_t> home_of(static_cast<size_t>(M));
  for (int r = 0; r < N; ++r)
    for (int64_t t = homes[static_cast<size_t>(r)]; t < homes[static_cast<size_t>(r) + 1]; ++t)
      home_of[static_cast<size_t>(t)] = r;
  // needs[t * N + q]: token t has an expert on rank q.
  std::vector<char> needs(static_cast<size_t>(M * N), 0);
  for (int64_t t = 0; t < M; ++t)
    for (int64_t i = 0; i < k; ++i) needs[static_cast<size_t>(t * N) + owner(t, i)] = 1;

  ExpertDispatch d;
  const int64_t h0 = homes[me];
  d.home_rows = homes[me + 1] - h0;
  const auto zeros = std::vector<int64_t>(static_cast<size_t>(N), 0);
  d.dispatch = {zeros, zeros, zeros, zeros};
  d.combine = d.dispatch;
  for (int q = 0; q < N; ++q) {
    const auto qi = static_cast<size_t>(q);
    d.dispatch.send_row0[qi] = static_cast<int64_t>(d.send_src.size());
    for (int64_t t = h0; t < h0 + d.home_rows; ++t)
      if (needs[static_cast<size_t>(t * N) + qi])
        d.send_src.push_back(static_cast<int32_t>(t - h0));
    d.dispatch.send_rows[qi] = static_cast<int64_t>(d.send_src.size()) - d.dispatch.send_row0[qi];
  }
  // Received in order of source rank, tokens ascending within each: token order, homes being
  // contiguous runs. pos[t]: token t's received row.
  std::vector<int32_t> pos(static_cast<size_t>(M), -1);
  for (int64_t t = 0; t < M; ++t)
    if (needs[static_cast<size_t>(t * N) + me]) {
      d.dispatch.recv_rows[static_cast<size_t>(home_of[static_cast<size_t>(t)])]++;
      pos[static_cast<size_t>(t)] = static_cast<int32_t>(d.recv_rows++);
    }
  for (size_t p = 1; p < static_cast<size_t>(N); ++p)
    d.dispatch.recv_row0[p] = d.dispatch.recv_row0[p - 1] + d.dispatch.recv_rows[p - 1];
  // by_expert[e]: the routed pairs t * k + i with expert e, tokens ascending.
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(E));
  for (int64_t j = 0; j < M * k; ++j) by_expert[static_cast<size_t>(ids[j])].push_back(j);
  // This rank's experts over their tokens, expert-major; the token of each expert row.
  std::vector<int32_t> row_token;
  for (int32_t e : place.experts[me]) {
    const std::vector<int64_t>& pairs = by_expert[static_cast<size_t>(e)];
    if (pairs.empty()) continue;
    d.group_expert.push_back(e);
    d.group_row0.push_back(static_cast<int64_t>(d.expert_src.size()));
    d.group_rows.push_back(static_cast<int64_t>(pairs.size()));
    for (int64_t j : pairs) {
      d.expert_src.push_back(pos[static_cast<size_t>(j / k)]);
      row_token.push_back(static_cast<int32_t>(j / k));
    }
  }
  for (int q = 0; q < N; ++q) {
    const auto qi = static_cast<size_t>(q);
    d.combine.send_row0[qi] = static_cast<int64_t>(d.return_src.size());
    for (size_t j = 0; j < row_token.size(); ++j)
      if (home_of[static_cast<size_t>(row_token[j])] == q)
        d.return_src.push_back(static_cast<int32_t>(j));
    d.combine.send_rows[qi] = static_cast<int64_t>(d.return_src.size()) - d.combine.send_row0[qi];
  }
  const auto is_home = [&](int64_t j) { return j / k >= h0 && j / k < h0 + d.home_rows; };
  // Rows back from rank p: p's experts ascending, this rank's tokens ascending within each.
  // back[j - h0 * k]: where the output of routed pair j lands.
  std::vector<int32_t> back(static_cast<size_t>(d.home_rows * k), -1);
  for (int p = 0; p < N; ++p) {
    const auto pi = static_cast<size_t>(p);
    d.combine.recv_row0[pi] = d.returned_rows;
    for (int32_t e : place.experts[pi])
      for (int64_t j : by_expert[static_cast<size_t>(e)])
        if (is_home(j))
          back[static_cast<size_t>(j - h0 * k)] = static_cast<int32_t>(d.returned_rows++);
    d.combine.recv_rows[pi] = d.returned_rows - d.combine.recv_row0[pi];
  }
  // The sum's order: one rank's (MoeFfn::run_grouped's counting sort), restricted to these tokens.
  for (const std::vector<int64_t>& pairs : by_expert)
    for (int64_t j : pairs)
      if (is_home(j)) {
        d.sum_src.push_back(back[static_cast<size_t>(j - h0 * k)]);
        d.sum_token.push_back(static_cast<int32_t>(j / k - h0));
        d.sum_scale.push_back(weights[j]);
      }
  return d;
}

ExpertExchangeBuffers::ExpertExchangeBuffers(Backend& b, int64_t max_rows, int64_t k, int64_t width)
    : b_(b) {
  const auto bytes = static_cast<size_t>(max_rows * k * width) * sizeof(float);
  send = static_cast<float*>(b_.alloc(bytes));
  recv = static_cast<float*>(b_.alloc(bytes));
  order = static_cast<float*>(b_.alloc(bytes));
}

ExpertExchangeBuffers::~ExpertExchangeBuffers() {
  b_.free(send);
  b_.free(recv);
  b_.free(order);
}

void run_expert_dispatch(Backend& b, Communicator& comm, const ExpertDispatch& d, const float* h,
                         int64_t width, ExpertExchangeBuffers& buf, float* x, float* y,
                         const ExpertGroupsFn& experts, float* out) {
  // A rank may have nothing to send, compute or sum in a pass (fewer rows than ranks; no token
  // routed to its experts): it still takes part in both exchanges.
  const auto gather = [&](const float* from, const std::vector<int32_t>& idx, float* to) {
    if (!idx.empty()) b.gather_rows(from, idx.data(), static_cast<int64_t>(idx.size()), width, to);
  };
  gather(h, d.send_src, buf.send);
  comm.exchange_rows(buf.send, buf.recv, width, d.dispatch);
  gather(buf.recv, d.expert_src, x);
  if (!d.group_expert.empty())
    experts(d.group_expert.data(), d.group_row0.data(), d.group_rows.data(),
            static_cast<int64_t>(d.group_expert.size()));
  gather(y, d.return_src, buf.send);
  comm.exchange_rows(buf.send, buf.recv, width, d.combine);
  gather(buf.recv, d.sum_src, buf.order);
  if (d.home_rows == 0) return;
  b.zero(out, d.home_rows * width);
  b.scatter_add_rows(out, buf.order, d.sum_token.data(), d.sum_scale.data(),
                     static_cast<int64_t>(d.sum_src.size()), width);
}

}  // namespace ts
