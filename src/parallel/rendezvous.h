// --dist-init HOST:PORT: how the processes of a multi-node run (one per node) meet before NCCL
// exists. Rank 0 listens on PORT; every other rank connects to HOST:PORT and says its rank and the
// world size; once all have, rank 0 sends each of them the same bytes (the NCCL id). A plain TCP
// exchange of a few bytes, once, at start.
#pragma once

#include <string>
#include <vector>

namespace ts {

struct DistInit {
  std::string host;
  int port = 0;
};

// Fails (Usage, naming --dist-init) unless `s` is HOST:PORT with a port in 1..65535.
DistInit parse_dist_init(const std::string& s);

// Rank 0 passes `blob` and gets it back; every other rank gets rank 0's. Fails (Runtime, naming
// the address and rank) when the ranks do not all meet within timeout_ms, or disagree on the
// world size or on who is which rank.
std::vector<char> rendezvous_broadcast(const DistInit& at, int rank, int size,
                                       const std::vector<char>& blob, int timeout_ms);

}  // namespace ts
