// The rule of Backend::page_experts() and commit_experts() over an ExpertPages whose arrays the
// caller can address: the host default runs it on copies read back, the CUDA kernel on the device,
// so both make the same decisions (tested on the host).
#pragma once

#include <cstdint>

#include "backend/backend.h"

#if defined(__CUDACC__)
#define TS_HOST_DEVICE __host__ __device__
#else
#define TS_HOST_DEVICE
#endif

namespace ts {

// False when a miss finds no slot this step does not use (fewer slots than routed experts).
TS_HOST_DEVICE inline bool page_step(const ExpertPages& p, const int32_t* ids, int64_t k) {
  const uint32_t step = ++p.stamp[p.n_slots];
  for (int64_t i = 0; i < k; ++i) {
    const int32_t s = p.slot_of[ids[i]];
    if (s < 0) continue;
    p.stamp[s] = step;
    ++p.counts[0];
  }
  for (int64_t i = 0; i < k; ++i) {
    const int32_t e = ids[i];
    if (p.slot_of[e] >= 0) continue;  // a hit, stamped above
    // Least recently used first, the lower slot on ties (empty slots have step 0).
    int32_t v = -1;
    for (int32_t s = 0; s < p.n_slots; ++s)
      if (p.stamp[s] != step && (v < 0 || p.stamp[s] < p.stamp[v])) v = s;
    if (v < 0) return false;
    const int32_t old = p.owner[v];
    if (old >= 0) {
      p.slot_of[old] = -1;
      for (int j = 0; j < 3; ++j)
        p.table[j * p.n_expert + old] = static_cast<const uint8_t*>(p.host[old]) + p.offset[j];
    }
    p.owner[v] = e;
    p.slot_of[e] = v;
    p.stamp[v] = step;
    for (int j = 0; j < 3; ++j)
      p.fill[j * p.n_expert + e] = static_cast<uint8_t*>(p.slot[v]) + p.offset[j];
    ++p.counts[1];
  }
  return true;
}

TS_HOST_DEVICE inline void commit_step(const ExpertPages& p, const int32_t* ids, int64_t k) {
  for (int64_t i = 0; i < k; ++i)
    for (int j = 0; j < 3; ++j) {
      const int64_t at = j * p.n_expert + ids[i];
      if (p.fill[at] == nullptr) continue;
      p.table[at] = p.fill[at];
      p.fill[at] = nullptr;
    }
}

}  // namespace ts
