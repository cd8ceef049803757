// A layer's token mixer: what mixes information across positions. Each kind keeps its own buffers
// for the forward pass and its own per-sequence state in each sequence's KvCache; the forward pass
// reads norm -> mixer -> norm -> FFN and asks the layer's mixer to run, whatever its kind.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/seq_chunk.h"

namespace ts {

// The rows of one forward pass as a mixer sees them: the sequences' chunks (rows in chunk order),
// each row's position (its KV row) and the positions that rotate it (the same, or [M][3] with
// M-RoPE), and whether the pass is a batched decode step (one token of each of a few
// sequences: see kDecodeStepRows).
struct PassRows {
  const std::vector<SeqChunk>& chunks;
  int64_t M = 0;
  const int32_t* pos = nullptr;
  bool decode_step = false;
  const int32_t* rope_pos = nullptr;
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  // Layer l over the pass's rows: h [M][n_embd] (normed) in, out [M][n_embd].
  virtual void run(int64_t l, const PassRows& rows, const float* h, float* out) = 0;
};

}  // namespace ts
