// Internal to the CPU attention: the tile kernel that attends a block of query vectors over a
// range of keys, and what it works on. attention.cpp cuts the work into blocks and key splits and
// combines the splits; the kernel is compiled once per instruction set (attention_tile_body.h).
//
// A block holds R query vectors: some query rows x the query heads of one kv head, lane
// r = row * group + head. Scores are kept key-major with the query vectors as the vector lanes
// (s[j * Rp + r]), so the softmax's running max and sum of each query vector are lane-wise and
// need no horizontal reductions; the outputs o[r][0..hd) keep head_dim as the lanes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/dtype.h"

namespace ts::cpu {

inline constexpr int64_t kLanes = 16;
// Keys per tile: a tile of K and V converted to f32 (2 x 64 x head_dim floats) and its scores
// (64 x Rp floats) stay in L1 / L2 while every query vector of the block passes over them. Tiles
// start at multiples of kTileKeys, so a query row's keys fall into the same tiles whichever block
// it is in.
inline constexpr int64_t kTileKeys = 64;
// From this many query vectors up, the scores are computed as a matrix product over the
// transposed queries (lanes = query vectors); below it as dot products over head_dim, which
// waste no lanes on a single decode row without GQA.
inline constexpr int64_t kMinLaneQueries = 4;

inline int64_t round_up_lanes(int64_t n) {
  return (n + kLanes - 1) / kLanes * kLanes;
}

struct QueryBlock {
  int64_t R = 0;    // query vectors
  int64_t Rp = 0;   // R rounded up to kLanes
  int64_t hd = 0;   // head_dim
  int64_t hdp = 0;  // head_dim rounded up to kLanes
  // R >= kMinLaneQueries: q[d * Rp + r] (transposed); else q[r * hdp + d] (zero padded). Both
  // already multiplied by the attention scale; lanes past R are zero.
  const float* q = nullptr;
  // Each lane attends keys [lo[r], hi[r]) (as floats, exact below 2^24); lanes past R attend
  // none, so that no exp is spent on them where exp is per lane.
  const float* lo = nullptr;
  const float* hi = nullptr;
  int64_t lo_max = 0;  // the largest lo and the smallest hi over the R real lanes: with
  int64_t hi_min = 0;  // R = Rp, a tile inside [lo_max, hi_min) needs no mask
};

// One kv head's rows in the cache: row j of K at k + j * row_bytes (likewise V).
struct KvHead {
  DType dtype = DType::F16;
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  size_t row_bytes = 0;
  size_t head_bytes = 0;  // of the kv head's slice of a row
};

// The softmax state of each query vector over the keys seen so far: running max m[Rp], sum of
// e^(s - m) l[Rp], and o[R][hdp] = sum of e^(s - m) v (not yet divided by l).
struct LaneState {
  float* m = nullptr;
  float* l = nullptr;
  float* o = nullptr;
};

// Work space of one tile: K and V as f32 [kTileKeys][hdp] (pad columns zero), scores
// [kTileKeys][Rp], the rescale of each lane [Rp]; for a kernel that interleaves keys and queries
// in its lanes (few query vectors), K rearranged [kTileKeys * hdp] and the queries [hdp][kLanes].
struct TileScratch {
  float* k = nullptr;
  float* v = nullptr;
  float* s = nullptr;
  float* alpha = nullptr;
  float* k_mixed = nullptr;
  float* q_mixed = nullptr;
};

// Floats a TileScratch needs for a block of Rp lanes and head_dim padded to hdp.
inline size_t tile_scratch_floats(int64_t Rp, int64_t hdp) {
  return static_cast<size_t>(3 * kTileKeys * hdp + kTileKeys * Rp + Rp + hdp * kLanes);
}

// One kv head's slice of a cache row as n floats.
void load_kv_head(DType dtype, const uint8_t* src, float* dst, int64_t n);

// Attends the block over keys [j0, j1) starting from an empty state (m = -inf, l = 0, o = 0),
// written to `st`. Keys outside a lane's [lo, hi) add exactly nothing to it. softcap: 0 = none.
using AttendKeysFn = void (*)(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1,
                              float softcap, const LaneState& st, const TileScratch& ws);
void attend_keys_avx512(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1,
                        float softcap, const LaneState& st, const TileScratch& ws);
void attend_keys_avx2(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1, float softcap,
                      const LaneState& st, const TileScratch& ws);
void attend_keys_generic(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1,
                         float softcap, const LaneState& st, const TileScratch& ws);

}  // namespace ts::cpu
