// The attention tile kernel (attention_tile_body.h) on plain arrays of 16 floats, vectorised by
// the compiler for the build's baseline instruction set: the path of CPUs without AVX2.
#include "backend/cpu/attention_tile_body.h"
#include "backend/cpu/attention_tile_plain.h"

namespace ts::cpu {

void attend_keys_generic(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1,
                         float softcap, const LaneState& st, const TileScratch& ws) {
  attend_keys<PlainLanes>(b, kv, j0, j1, softcap, st, ws);
}

}  // namespace ts::cpu
