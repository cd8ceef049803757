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

}  // namespace ts
