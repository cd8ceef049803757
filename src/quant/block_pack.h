// Quant codes packed into the block layouts of blocks.h (the inverse of dequant's unpacking),
// shared by the round-to-nearest quantisers (quantize_weights.cpp) and llama.cpp's searched ones
// (quantize_search.cpp). Codes are unsigned: each type's zero offset already added.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace ts {

// 32 codes of 4 bits (q4_0, q4_1, q5_x's low bits, iq4_nl; each iq4_xs sub-block).
void pack_nibbles32(const uint8_t* q, uint8_t* qs);
// Bit 4 of 32 codes (q5_0, q5_1).
void pack_fifth_bits32(const uint8_t* q, uint8_t* qh);
// 256 codes of 2 bits (q2_k).
void pack_q2_k_quants(const uint8_t* q, uint8_t* qs);
// q3_k: 16 sub-block scale codes in [0, 63] (32 = zero) and 256 codes in [0, 7] (4 = zero).
void pack_q3_k(const uint8_t* scale_codes, const uint8_t* q, BlockQ3_K& b);
// q4_k / q5_k: 8 scale and 8 min codes of 6 bits into the 12 scale bytes.
void pack_k4_scales(const uint8_t* sc, const uint8_t* mn, uint8_t* s);
// Low 4 bits of 256 codes (q4_k, q5_k).
void pack_k_nibbles(const uint8_t* q, uint8_t* qs);
// Bit 4 of 256 codes (q5_k).
void pack_q5_k_high(const uint8_t* q, uint8_t* qh);
// q6_k: 256 codes in [0, 63] (32 = zero); the scales are stored as they are.
void pack_q6_k_quants(const uint8_t* q, BlockQ6_K& b);
// iq4_xs: 8 sub-block scale codes in [0, 63] (32 = zero).
void pack_iq4_xs_scales(const uint8_t* scale_codes, BlockIQ4_XS& b);
// tq1_0 / tq2_0: 256 trits in [0, 2] (1 = zero).
void pack_tq1_0(const uint8_t* trits, BlockTQ1_0& b);
void pack_tq2_0(const uint8_t* trits, BlockTQ2_0& b);

}  // namespace ts
