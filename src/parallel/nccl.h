// NCCL communicators, through the plugin libturbospark_nccl.so (src/parallel/nccl/, built when the
// CUDA toolkit's nccl.h and libnccl are found; loaded on first use, so that a build or a machine
// without NCCL runs everything else).
#pragma once

#include <array>
#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace ts {

// ncclUniqueId's bytes: made by one rank, handed to every other (in-process, or by the --dist-init
// rendezvous) before they create their communicators.
using NcclId = std::array<char, 128>;

// NCCL's version code (e.g. 22809 for 2.28.9), or 0 when this build or machine has no NCCL, with
// *why saying what is missing.
int nccl_version(std::string* why = nullptr);
// A new id; fails (Usage) without NCCL.
NcclId nccl_unique_id();
// Rank `rank` of `size` on CUDA device `device`, its collectives queued on `stream` (a
// cudaStream_t: the rank's backend's, so that they order with its ops and can be recorded; null:
// a stream of its own). Blocks until every rank of the id has joined: ranks of one process call
// it from their own threads.
std::unique_ptr<Communicator> make_nccl_communicator(int rank, int size, const NcclId& id,
                                                     int device, void* stream);

}  // namespace ts
