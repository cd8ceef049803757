// Ranks as threads of one process over host memory: the communicator the CPU tests run tensor and
// expert parallelism on, with the same calls a device communicator takes. Sums are taken in rank
// order, the same bits on every rank.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace ts {

// `ranks` communicators of one group, rank r at index r; each is driven by its own thread.
std::vector<std::unique_ptr<Communicator>> make_thread_communicators(int ranks);

// Runs body(comm) for every communicator on a thread of its own and waits for all of them. A rank
// that throws releases the others (their next collective throws too) and the first error is
// rethrown here.
void run_ranks(const std::vector<std::unique_ptr<Communicator>>& comms,
               const std::function<void(Communicator&)>& body);

}  // namespace ts
