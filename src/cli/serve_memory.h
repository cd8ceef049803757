// What `serve` holds beside the engine's footprint, which counts the KV cache of one sequence of
// -c rows: the KV caches of the other --parallel slots (the prompt rows a slot keeps between
// requests live in its own cache), each slot's logits (a step's rows and the last prompt's), and
// the forward pass's workspace for a batch of --parallel rows when that is wider than the
// micro-batch. --memory-budget bounds all of it: the engine is given what the slots leave, and a
// server that cannot fit is refused at start with each part named. An encoder's server holds its
// weights and the buffers of its largest pass.
#pragma once

#include <cstdint>
#include <cstdio>

#include "runtime/encoder.h"
#include "runtime/engine.h"

namespace ts::cli {

struct ServeShape {
  int parallel = 1;
  int64_t ctx = 4096;  // rows per slot
  int64_t lookup = 0;  // guessed rows per slot and step
};

struct ServeMemory {
  uint64_t engine = 0;       // the engine's footprint (one slot's KV included)
  uint64_t other_kv = 0;     // the other slots' KV caches
  uint64_t slot_logits = 0;  // every slot's logits
  uint64_t wide_batch =
      0;  // workspace and scratch of a batch of `parallel` rows beyond the engine's
  uint64_t total = 0;
};

// `o` with its memory budget reduced by what the slots hold beside the engine (before the engine
// exists, so the expert slots it derives from the budget leave room for them). Fails (Budget)
// when the slots alone take the whole budget.
EngineOptions serve_engine_options(EngineOptions o, const std::string& model_path,
                                   const ServeShape& shape);
// The whole server's memory; fails (Budget) when it exceeds `budget` (0: none), naming each part.
ServeMemory serve_memory(Engine& engine, const ServeShape& shape, uint64_t budget);
void print_serve_memory(const ServeMemory& m, const ServeShape& shape, std::FILE* out);

struct EncoderServeMemory {
  uint64_t weights = 0;
  uint64_t pass = 0;  // the buffers of a pass of `rows` rows
  int64_t rows = 0;
  uint64_t total = 0;
};

// An encoder's server whose passes take at most `rows` rows; fails (Budget) when it exceeds
// `budget` (0: none), naming each part.
EncoderServeMemory encoder_serve_memory(const Encoder& encoder, int64_t rows, uint64_t budget);
void print_encoder_serve_memory(const EncoderServeMemory& m, std::FILE* out);

}  // namespace ts::cli
