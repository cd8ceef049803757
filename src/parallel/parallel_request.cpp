#include "parallel/parallel_request.h"

#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "parallel/nccl.h"
#include "parallel/rendezvous.h"

namespace ts {
namespace {

std::string flags_of(const ParallelRequest& r) {
  std::string s;
  if (r.tensor > 1) s = "--tensor-parallel " + std::to_string(r.tensor);
  if (r.expert > 1)
    s += (s.empty() ? "" : " with ") + ("--expert-parallel " + std::to_string(r.expert));
  return s;
}

}  // namespace

int parallel_ranks(const ParallelRequest& r) {
  if (r.tensor < 1) fail(ErrorKind::Usage, "--tensor-parallel must be at least 1");
  if (r.expert < 1) fail(ErrorKind::Usage, "--expert-parallel must be at least 1");
  if (r.tensor > 1 && r.expert > 1 && r.tensor != r.expert)
    fail(ErrorKind::Usage, "--tensor-parallel " + std::to_string(r.tensor) +
                               " and --expert-parallel " + std::to_string(r.expert) +
                               " must name the same GPUs (one count)");
  return std::max(r.tensor, r.expert);
}

void check_parallel_request(const ParallelRequest& r, const ParallelHost& host) {
  const int N = parallel_ranks(r);
  if (!r.dist_init.empty()) parse_dist_init(r.dist_init);
  if (N == 1) {
    if (!r.dist_init.empty())
      fail(ErrorKind::Usage, "--dist-init needs --tensor-parallel or --expert-parallel");
    return;
  }
  const std::string flags = flags_of(r), need = " needs " + std::to_string(N) + " GPUs; ";
  if (host.backend == "cpu") fail(ErrorKind::Usage, flags + need + "this run is on the CPU");
  if (host.gpus < N && r.dist_init.empty())
    fail(ErrorKind::Usage,
         flags + need + "this machine has " + std::to_string(host.gpus) +
             (host.gpus_why.empty() ? "" : " (the CUDA backend: " + host.gpus_why + ")"));
  if (host.nccl_version == 0)
    fail(ErrorKind::Usage, flags + need + "this build has no NCCL communicator" +
                               (host.nccl_why.empty() ? "" : " (" + host.nccl_why + ")"));
  fail(ErrorKind::Unsupported, flags +
                                   ": the engine does not run parallel layers yet (the "
                                   "communicators, planner and expert dispatch exist: "
                                   "docs/PARALLEL.md)");
}

void check_parallel_flags(const ParallelRequest& r, const std::string& backend) {
  if (parallel_ranks(r) == 1 && r.dist_init.empty()) return;
  ParallelHost host;
  host.backend = backend;
  if (backend != "cpu") {
    host.gpus = cuda_device_count(&host.gpus_why);
    host.nccl_version = nccl_version(&host.nccl_why);
  }
  check_parallel_request(r, host);
}

}  // namespace ts
