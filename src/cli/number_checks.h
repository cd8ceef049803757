// Checks of numeric flags. CLI11's PositiveNumber and NonNegativeNumber report a bad value as
// "not in range 0.000000 to 179769313486231570814527423731704356798070567525844996598917...",
// the whole range of a double; these name the bound the flag takes.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace ts::cli {

// The value must be a number >= least: "must be at least 1, got 0".
CLI::Validator at_least(int64_t least);

}  // namespace ts::cli
