// The process's memory as the kernel counts it.
#pragma once

#include <cstdint>

namespace ts {

// Peak resident set size (VmHWM) in bytes, 0 when /proc is unavailable.
uint64_t peak_rss_bytes();
// Current resident set size (VmRSS) in bytes.
uint64_t current_rss_bytes();

}  // namespace ts
