// A fault the expert reads can be told to suffer, so that tests can check that a failed or short
// read stops the request with a named error: set in a test (set_io_fault) or, for a whole process,
// by TS_IO_FAULT=error[:N] or short[:N] (the fault strikes the N-th read from then on, default 1).
#pragma once

#include <cstdint>

namespace ts {

enum class IoFault { None, Error, Short };

// Arms `fault` for the `after`-th expert read from now (1: the next one); None disarms.
void set_io_fault(IoFault fault, int64_t after = 1);
// Called once per read by the I/O layer: the fault this read suffers (None for almost all).
IoFault take_io_fault();

}  // namespace ts
