// Communicator: the collectives that tensor and expert parallelism need between the ranks of one
// model (docs/PARALLEL.md). Every buffer is memory of the rank's own backend (device memory on a
// GPU, host memory on the CPU); a device implementation queues the collective on the backend's
// stream, after the ops queued before it, so that it can sit inside a recorded step. Every rank
// calls the same collectives in the same order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts {

// One rank's part of a row exchange (all-to-all with per-peer counts): rows
// [send_row0[p], send_row0[p] + send_rows[p]) of `send` go to rank p (ranges may overlap: the
// same rows to every peer is an all-gather), and the rows that rank p sends here land at
// recv_row0[p] of `recv`. recv_rows[p] must equal what rank p sends here.
struct RowExchange {
  std::vector<int64_t> send_row0, send_rows;
  std::vector<int64_t> recv_row0, recv_rows;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // x[i] = the sum over ranks of x[i], the same bits on every rank.
  virtual void all_reduce_sum(float* x, int64_t n) = 0;
  // Rows of `width` floats between the ranks, as `x` says (grouped sends and receives).
  virtual void exchange_rows(const float* send, float* recv, int64_t width,
                             const RowExchange& x) = 0;
  // Returns once every rank has called it (and, on a device, their queued work is done).
  virtual void barrier() = 0;
};

// Checks that `x` names one range per rank of a communicator of `ranks` (internal: the planners
// build it), naming the field otherwise.
void check_row_exchange(const RowExchange& x, int ranks);

}  // namespace ts
