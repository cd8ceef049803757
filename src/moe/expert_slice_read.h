// Reads an expert's slice of one projection (model_spec.h's ExpertSlice) into memory in the
// kernels' row layout: straight from the file, or rearranged from how gpt-oss's checkpoints store
// their experts (SliceLayout).
#pragma once

#include <cstdint>
#include <string>

#include "model/model_spec.h"

namespace ts {

// Bytes [begin, end) of the slice's rows laid end to end, to dst. A rearranged slice is built
// whole and then cut (its rows come from all over its source). `what` names it in errors.
void read_expert_slice(const ExpertSlice& s, uint8_t* dst, uint64_t begin, uint64_t end,
                       const std::string& what);

// Checks a slice read whole into `bytes` as read_expert_slice() does (MXFP4 scales).
void check_expert_slice(const ExpertSlice& s, const uint8_t* bytes, const std::string& what);

// Rows of gpt-oss's MXFP4 checkpoints into GGUF MXFP4 blocks: `rows` rows of `blocks_per_row`
// blocks, row r taken from source row first + r * step of `planes` ([rows][blocks][16] bytes,
// element 2i in the low nibble of byte i, 2i + 1 in the high) and of `scales` ([rows][blocks]).
void mxfp4_planes_to_blocks(const uint8_t* planes, const uint8_t* scales, int64_t rows,
                            int64_t blocks_per_row, int64_t first, int64_t step, uint8_t* dst);

}  // namespace ts
