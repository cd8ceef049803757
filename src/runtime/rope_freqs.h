// Rotary inverse frequencies for a layer kind, with the family's scaling applied.
#pragma once

#include <vector>

#include "model/arch_config.h"

namespace ts {

// rotary_dim / 2 inverse frequencies. `sliding` selects the local rope base (Gemma 3), whose
// layers are never frequency-scaled. `divisors` (GGUF rope_freqs, may be empty) divide them.
std::vector<float> rope_inv_freq(const ArchConfig& c, bool sliding,
                                 const std::vector<float>& divisors);

// M-RoPE: for each of the rotary_dim / 2 frequency pairs, the position stream (0 = T, 1 = H,
// 2 = W) that rotates it (ArchConfig::mrope_sections); empty without M-RoPE.
std::vector<uint8_t> mrope_pair_streams(const ArchConfig& c);

// Layer l's head_dim / 2 inverse frequencies where layers differ in head_dim (Gemma 4): a sliding
// layer's 1 / theta_local^(2i / head_dim); a global layer's 1 / theta^(2i / head_dim) for its first
// rope_partial_global of pairs and 0 after them (proportional rope), each divided by `divisors`
// (GGUF rope_freqs: 1 or 1e30, the same rope stated per pair) when given.
std::vector<float> rope_inv_freq_layer(const ArchConfig& c, int64_t l,
                                       const std::vector<float>& divisors);

}  // namespace ts
