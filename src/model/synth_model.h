// Synthetic models: a GGUF file of a real model's shape (model/synth_shapes.h) with seeded random
// weights, written with llama.cpp's tensor names and metadata (and a SentencePiece-style
// vocabulary) so that other runtimes can be measured on the very same file. Weights are scaled to
// keep activations finite through every layer: norms near 1, matrices uniform with standard
// deviation 1 / sqrt(fan_in). Tensors are generated and written a slice at a time: the file never
// sits in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "quant/dtype.h"

namespace ts {

struct SynthOptions {
  std::string shape;  // a name from synth_shapes()
  // Of every matrix; norms, routers, biases and rope_freqs stay f32. MXFP4 is llama.cpp's
  // MXFP4_MOE (the only file type that holds it): the routed experts MXFP4, every other matrix
  // q8_0.
  DType dtype = DType::Q8_0;
  // llama.cpp's Q4_K_M / Q5_K_M instead of one dtype (`dtype` then q4_k / q5_k): `dtype` matrices,
  // q6_k for the output (the tied embedding when there is no output matrix) and for attn_v (or
  // a DeltaNet layer's attn_qkv) and ffn_down (routed and shared) in the layers where its
  // quantiser spends more bits (its extra rules for 8-expert models are not followed). Files from
  // the hub are mostly these mixes.
  bool k_m_mix = false;
  int64_t layers = 0;  // 0: the shape's depth; else its first `layers` layers
  uint64_t seed = 0;
  int threads = 0;  // 0: physical cores
};

struct SynthSummary {
  uint64_t file_bytes = 0;
  uint64_t params = 0;
  int64_t tensors = 0;
  int64_t layers = 0;
};

// Checks the options (shape, dtype, depth, rows whole blocks) and sizes the file; no I/O.
SynthSummary plan_synth_model(const SynthOptions& o);

// Writes the model to `path`, first as `path`.part, renamed once complete. Refuses (Usage) when
// the file system holding `path` has too little free space. `progress` receives bytes written so
// far and the total.
SynthSummary write_synth_model(const SynthOptions& o, const std::string& path,
                               const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace ts
