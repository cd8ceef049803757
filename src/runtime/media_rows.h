// A pass's image rows (RowInputs), on the backend: the vision features that replace their rows'
// token embeddings, and Qwen3-VL's DeepStack features, added to the rows' hidden states after the
// first n_deepstack layers. The features are host memory (the vision tower runs on the host): a
// pass uploads each image's run of embeddings in one copy, and all its DeepStack features in one,
// by layer, so that each layer's addition is one scatter over the pass's image rows.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/engine.h"
#include "runtime/seq_chunk.h"

namespace ts {

class MediaRows {
 public:
  // Buffers for micro-batches of up to max_rows rows, from `scratch` (the forward's allocator).
  template <class Scratch>
  MediaRows(Engine& engine, int64_t max_rows, Scratch&& scratch);

  // Floats a row of a micro-batch takes in these buffers (the footprint's workspace).
  static int64_t row_floats(const ArchConfig& c);

  // At the start of a pass over the chunks' rows (in chunk order): their given embeddings into x
  // [rows][n_embd], and their DeepStack features uploaded.
  void prepare(const std::vector<SeqChunk>& chunks, float* x);
  // After layer l < n_deepstack: the uploaded features of layer l added to their rows of x.
  void add(int64_t l, float* x);

 private:
  Backend& b_;
  const ArchConfig& c_;
  float* deepstack_ = nullptr;  // [n_deepstack][rows_][n_embd], backend memory
  std::vector<float> staging_;  // the same on the host
  std::vector<int32_t> rows_;   // the pass's rows that have DeepStack features
  std::vector<float> ones_;     // each row's scale in the scatter
};

template <class Scratch>
MediaRows::MediaRows(Engine& engine, int64_t max_rows, Scratch&& scratch)
    : b_(engine.backend()), c_(engine.cfg()) {
  if (c_.n_deepstack > 0) deepstack_ = scratch(static_cast<size_t>(max_rows * row_floats(c_)));
}

}  // namespace ts
