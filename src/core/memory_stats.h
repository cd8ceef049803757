// The process's memory as the kernel counts it.
#pragma once

#include <cstdint>

namespace ts {

// Peak resident set size (VmHWM) in bytes, 0 when /proc is unavailable.
uint64_t peak_rss_bytes();
// Current resident set size (VmRSS) in bytes.
uint64_t current_rss_bytes();
// The resident pages mapped from the executable and the shared libraries it loaded, now: the
// program itself, not anything it allocated. How much of the code is touched depends on how the
// binary was linked, so a gate on the engine's memory subtracts it rather than guessing it.
// 0 when /proc is unavailable.
uint64_t program_rss_bytes();

}  // namespace ts
