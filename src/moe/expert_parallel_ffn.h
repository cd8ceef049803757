// ExpertParallelFfn: one rank's part of an MoE layer under expert parallelism (docs/PARALLEL.md).
// Every rank routes the micro-batch (its rows are the same on every rank: attention replicated or
// tensor-parallel) and runs only the experts ExpertPlacement gives it, over every row routed to
// them, and the outputs are combined on each token's home rank in one rank's order, then gathered
// to every rank: the layer's output is bit-identical to MoeFfn::run on one rank.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/arch_config.h"
#include "moe/moe_ffn.h"
#include "parallel/communicator.h"
#include "parallel/expert_dispatch.h"
#include "parallel/partition.h"

namespace ts {

class ExpertParallelFfn {
 public:
  // `moe` and `buffers` are the rank's own MoE FFN and the buffers it was built with (its gathered
  // rows and expert outputs hold max_rows * k rows); `place` has comm.size() ranks.
  ExpertParallelFfn(Backend& b, const ArchConfig& c, MoeFfn& moe, const FfnBuffers& buffers,
                    Communicator& comm, ExpertPlacement place, int64_t max_rows);
  ~ExpertParallelFfn();
  ExpertParallelFfn(const ExpertParallelFfn&) = delete;
  ExpertParallelFfn& operator=(const ExpertParallelFfn&) = delete;

  // Layer l over h [M][n_embd], routed already (MoeFfn::route), into out [M][n_embd]: the routed
  // experts and the shared expert.
  void run(int64_t l, const float* h, int64_t M, float* out);

 private:
  Backend& b_;
  const ArchConfig& c_;
  MoeFfn& moe_;
  FfnBuffers buf_;
  Communicator& comm_;
  ExpertPlacement place_;
  ExpertExchangeBuffers exchange_;
  float* home_out_ = nullptr;  // [max_rows][n_embd]: the home tokens' combined rows
  std::vector<float> routing_host_;
};

}  // namespace ts
