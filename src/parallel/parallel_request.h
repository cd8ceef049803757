// --tensor-parallel N, --expert-parallel N and --dist-init HOST:PORT as a run asks for them, and
// the check that the build and the machine can serve them, made before a model is opened.
#pragma once

#include <string>

namespace ts {

struct ParallelRequest {
  int tensor = 1;
  int expert = 1;
  std::string dist_init;  // HOST:PORT, multi-node; empty: one process
};

// What the check needs to know of the build and the machine.
struct ParallelHost {
  std::string backend;   // the --backend asked for: auto, cpu or cuda
  int gpus = 0;          // CUDA devices visible
  std::string gpus_why;  // why none, when the CUDA plugin did not load
  int nccl_version = 0;  // 0: no NCCL
  std::string nccl_why;
};

// The GPUs a request spreads over: 1 without parallelism; tensor and expert parallelism share
// the same ranks, so when both are above 1 they must agree (Usage error otherwise).
int parallel_ranks(const ParallelRequest& r);

// Refuses (Usage) a request this build or machine cannot serve, saying what it needs and what
// there is: "--tensor-parallel 2 needs 2 GPUs; this machine has 0 ...". A request it could serve
// is refused as well (Unsupported) until the engine hosts the parallel layers (docs/PARALLEL.md).
void check_parallel_request(const ParallelRequest& r, const ParallelHost& host);
// The same on this machine, for --backend `backend`: its GPUs and NCCL are looked up (their
// plugins loaded) only when the request asks for parallelism.
void check_parallel_flags(const ParallelRequest& r, const std::string& backend);

}  // namespace ts
