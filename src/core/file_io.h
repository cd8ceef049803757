// Positional reads that either deliver every byte or fail with a message naming what was read.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace ts {

// Reads exactly n bytes at `offset` of `fd` into dst. A short read (file truncated after open)
// or an I/O error throws ts::Error of `kind` naming `what`.
void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& what,
                ErrorKind kind);

}  // namespace ts
