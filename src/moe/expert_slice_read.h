// Reads an expert's slice of one projection (model_spec.h's ExpertSlice) into memory in the
// kernels' row layout: straight from the file, or rearranged from how gpt-oss's and Qwen3-VL-MoE's
// checkpoints store their experts (SliceLayout).
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

}  // namespace ts
