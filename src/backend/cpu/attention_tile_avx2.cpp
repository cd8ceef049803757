// The attention tile kernel (attention_tile_body.h) on plain arrays of 16 floats, vectorised by
// the compiler for AVX2 + FMA (two 256-bit vectors per 16 lanes): the path of CPUs without
// AVX-512.

// The standard headers the kernel uses come first: an inline library function compiled inside
// the target region below could be picked by the linker for code that runs on any CPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cpu/attention_tile.h"
#include "backend/cpu/isa_target.h"

TS_ISA_BEGIN("avx2,fma,f16c")

#include "backend/cpu/attention_tile_body.h"
#include "backend/cpu/attention_tile_plain.h"

namespace ts::cpu {

void attend_keys_avx2(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1, float softcap,
                      const LaneState& st, const TileScratch& ws) {
  attend_keys<PlainLanes>(b, kv, j0, j1, softcap, st, ws);
}

}  // namespace ts::cpu

TS_ISA_END()
