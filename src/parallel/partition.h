// How a model's layers are cut over the ranks of tensor and expert parallelism (docs/PARALLEL.md):
// tensor parallel splits attention heads (q by heads, k / v by kv heads, the output projection by
// the same heads' columns) and the dense FFN (gate / up by rows, down by the same columns), one
// all-reduce after each; expert parallel gives each rank a disjoint set of a layer's routed
// experts. Decided at open from the model's sizes; what cannot be cut evenly is refused, naming
// the sizes.
#pragma once

#include <cstdint>
#include <vector>

namespace ts {

// The sizes tensor parallelism cuts.
struct TensorParallelShape {
  int64_t n_head = 0;  // 0: no attention to split
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;  // the dense FFN's width (0: the model has none)
  // Elements per block of the row-parallel weights' types (attn_output, ffn_down): each rank's
  // columns of them must be whole blocks (1 for f32 / f16 / bf16).
  int64_t block_elems = 1;
};

// When there are fewer kv heads than ranks: each kv head held by ranks / n_head_kv ranks (its q
// heads' ranks), or refused.
enum class KvHeadPolicy { Replicate, Refuse };

// Rank r's share: q heads [head0, head0 + heads), kv heads [kv_head0, kv_head0 + kv_heads), dense
// FFN columns [ff0, ff0 + ffs).
struct RankSlice {
  int64_t head0 = 0, heads = 0;
  int64_t kv_head0 = 0, kv_heads = 0;
  int64_t ff0 = 0, ffs = 0;
};

struct TensorPlan {
  int ranks = 1;
  bool kv_replicated = false;  // kv heads held by several ranks (fewer kv heads than ranks)
  std::vector<RankSlice> slice;
};

// Fails (Unsupported, "--tensor-parallel N: ...") when the heads, the kv heads or the FFN do not
// split evenly over `ranks`, or a rank's columns are not whole blocks.
TensorPlan plan_tensor_parallel(const TensorParallelShape& s, int ranks, KvHeadPolicy kv);

// Which rank holds each routed expert of a layer (the same for every layer), and each rank's
// experts in ascending order.
struct ExpertPlacement {
  int ranks = 1;
  std::vector<int32_t> owner;                 // [n_expert]
  std::vector<std::vector<int32_t>> experts;  // [ranks]
};

// Rank r holds a contiguous run of experts, the first n_expert % ranks ranks one more.
ExpertPlacement place_experts_contiguous(int64_t n_expert, int ranks);
// Experts by measured load (how often each is routed), heaviest first to the least loaded rank
// that has room (ceil(n_expert / ranks) each; ties to the lower rank): each rank's share of the
// routed rows as even as the counts allow, the same for the same loads.
ExpertPlacement place_experts_balanced(const std::vector<double>& load, int ranks);

// Streamed experts: each rank's slots per MoE layer from its own memory budget for them. All its
// experts when they fit (resident); else what the budget holds, which must be at least the most
// of one token's k experts the rank can own (Budget error, naming the rank and the sizes).
int64_t rank_expert_slots(int rank, int64_t owned, int64_t k, uint64_t budget_bytes,
                          uint64_t expert_bytes, int64_t n_moe_layers);

}  // namespace ts
