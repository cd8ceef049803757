// The one stats line `run` and `chat` print on stderr after a generation.
#pragma once

#include <cstdio>

#include "runtime/engine.h"
#include "runtime/generator.h"

namespace ts::cli {

void print_run_stats(Engine& engine, const GenerateResult& r, std::FILE* out);

}  // namespace ts::cli
