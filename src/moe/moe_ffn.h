// MoeFfn: the routed-expert FFN of every MoE layer, one owner from routing to the combined output.
// A layer's pass over a micro-batch:
//   route:    router logits -> top-k expert ids and weights per row (Backend::route)
//   place:    the experts made present where their weights are read: resident, in slots filled
//             from the file (ExpertStore), or paged on the device
//   multiply: the experts' gate/up, activation and down over their rows, either by expert id on
//             the device (one launch a projection) or grouped on the host (rows sorted by expert)
//   combine:  each row's k outputs summed by weight in ascending expert order (so streamed and
//             resident experts give the same bits), plus a shared expert when the layer has one
// Which way each step goes is decided once at construction from the backend and the store.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "model/arch_config.h"
#include "moe/expert_store.h"

namespace ts {

// A shared expert: a dense GLU beside the routed experts, scaled by sigmoid(x . gate) when
// gate_inp is present.
struct SharedExpertWeights {
  Weight gate_up, gate, up, down;  // gate_up: gate and up stacked (one matmul), else apart
  Weight gate_inp;                 // [1][n_embd], or none
};

// One MoE layer's resident weights (its routed experts live in the ExpertStore).
struct MoeLayerWeights {
  Weight router;
  const float* router_logit_bias = nullptr;  // added to the router's logits (gpt-oss)
  const float* router_bias = nullptr;        // selection bias (MiniMax), backend memory
  std::vector<float> router_bias_host;       // the same, for the host's prefetch guesses
  SharedExpertWeights shared;
  // Each expert's biases, resident (gpt-oss): [n_expert][2 ff], per expert gate then up, and
  // [n_expert][n_embd] for down; backend memory, null without.
  const float* gate_up_bias = nullptr;
  const float* down_bias = nullptr;
  // A factor per expert on its routed weight, after renormalisation (Gemma 4), backend memory and
  // the same on the host (the prefetch guesses); null / empty without.
  const float* expert_scale = nullptr;
  std::vector<float> expert_scale_host;
};

// Buffers the FFN shares with the rest of the forward pass, each of max_rows rows: the FFN-wide
// gate | up pair and the activation (ffn_row_floats), the gathered input rows and the experts'
// output (max_rows x k rows of n_embd each).
struct FfnBuffers {
  float* gate = nullptr;
  float* up = nullptr;
  float* act = nullptr;
  float* rows = nullptr;
  float* out = nullptr;
};

class MoeFfn {
 public:
  // `layers[l]` is layer l's weights (null for a dense layer). `scratch` allocates backend memory
  // that the caller frees.
  MoeFfn(Backend& b, const ArchConfig& c, ExpertStore& store,
         std::vector<const MoeLayerWeights*> layers, int64_t max_rows, const FfnBuffers& buffers,
         const std::function<float*(size_t)>& scratch);
  ~MoeFfn();
  MoeFfn(const MoeFfn&) = delete;
  MoeFfn& operator=(const MoeFfn&) = delete;

  // Layer l's router over h [M][n_embd]: the ids and weights of each row's experts.
  void route(int64_t l, const float* h, int64_t M);
  // Layer l's experts over h, as route() routed it, into `out` [M][n_embd] — or left as routed
  // rows for the next norm to combine (output_routed(); add_output_norm()).
  void run(int64_t l, const float* h, int64_t M, bool decode_step, float* out);
  bool output_routed() const { return output_routed_; }
  // x += the layer's output (out, or the routed rows), then h = rms_norm(x) with weight w. `out`
  // may be overwritten with the combined rows.
  void add_output_norm(float* x, float* out, const float* w, int64_t M, float eps, bool plus_one,
                       float* h);
  // Combines routed rows into `out` (for ops that read the output itself).
  void sum_output(int64_t M, float* out);
  // out += the layer's shared expert over h (scaled by its sigmoid gate when it has one).
  void shared_expert(int64_t l, const float* h, int64_t M, float* out);

  // Expert parallelism (moe/expert_parallel_ffn.h). After route(): the routing in backend memory,
  // ids [M][k] (int32) then weights [M][k].
  const float* routing() const { return routing_; }
  // The resident experts ids[g] (ascending) over their runs of the gathered rows (buffers.rows:
  // group g is rows [row0[g], row0[g] + rows[g])) into the same rows of buffers.out, with the
  // kernels run_grouped() gives them.
  void run_expert_groups(int64_t l, const int32_t* ids, const int64_t* row0, const int64_t* rows,
                         int64_t G);

  // True when an M-row pass runs the experts on the device by expert id: one token, or a batched
  // decode step over resident experts, on a backend that indexes them, every MoE layer with a
  // table. Such a pass needs no host between its layers, but for streamed experts.
  bool experts_indexed(int64_t M, bool decode_step) const;
  // The first MoE layer after `from` whose experts stream (a recorded decode step is cut there:
  // its experts are known only after its router), or n_layer.
  int64_t next_streamed_layer(int64_t from) const;
  // One token at layer l, a cut: queues l's routing back to the host (and a guess of the next
  // streamed layer's, when prefetching).
  void read_back_routing(int64_t l, const float* h);
  // Then: makes the experts in the routing read back present in l's slots and table.
  void fetch_streamed_experts(int64_t l);

 private:
  // out = act(gate) * up over rows of n (stride apart), by the family's activation.
  void activate(const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
                float* out);
  // Adds each group's expert biases (when the layer has them) to its rows of the gate / up
  // outputs (after the gate/up matmul) or of the down outputs.
  void add_gate_up_bias(const MoeLayerWeights& W, const int32_t* ids, const int64_t* row0,
                        const int64_t* rows, int64_t G, bool stacked);
  void add_down_bias(const MoeLayerWeights& W, const int32_t* ids, const int64_t* row0,
                     const int64_t* rows, int64_t G);
  bool predicts_next(int64_t l) const;
  void route_into(int64_t l, const float* h, int64_t M, float* out);
  void run_indexed(int64_t l, const float* h, int64_t M);
  void run_grouped(int64_t l, const float* h, int64_t M, bool decode_step, float* out);
  // Gate / up, the activation and down of G experts over their runs of the routed rows: group g
  // takes rows [row0[g], row0[g] + rows[g]) of the gathered rows, consecutive and ascending.
  // ids: the groups' expert ids (for their biases).
  void experts(int64_t l, const int32_t* ids, const ExpertWeights* const* ew, const int64_t* row0,
               const int64_t* rows, int64_t G);
  void prefetch_next_layer(int64_t l, const float* h, int64_t M);
  int64_t next_moe_layer(int64_t l) const;  // the first MoE layer after l, or n_layer
  std::vector<int32_t> guess_experts(int64_t target, const float* h, int64_t M);
  void score_guesses(int64_t l);

  Backend& b_;
  const ArchConfig& c_;
  ExpertStore& store_;
  std::vector<const MoeLayerWeights*> layers_;
  FfnBuffers buf_;
  bool experts_on_device_ = false;  // every MoE layer's experts resident and indexed on the device
  bool output_routed_ = false;      // out is still the last layer's routed rows (buf_.out)
  float* router_ = nullptr;         // router logits [max_rows][n_expert]
  float* routing_ = nullptr;        // ids [M][k] (int32), then weights [M][k]
  float* predicted_ = nullptr;      // the next streamed layer's guessed routing, like routing_
  // One token's k ids read back (alloc_host_pinned), then the k predicted for the next layer.
  int32_t* routed_ids_ = nullptr;
  std::vector<float> router_host_, routing_host_;
  std::vector<int32_t> ids_host_;
  // The routed rows in expert-major order: the token and weight of each, and per routed expert its
  // id, first row and row count.
  std::vector<int32_t> routed_src_, expert_ids_;
  std::vector<float> routed_scale_;
  std::vector<int64_t> group_row0_, group_rows_;
  std::vector<const ExpertWeights*> group_weights_;
  std::vector<const void*> group_ptrs_;
  // Decode steps, prefetching: per layer, the experts guessed for it 1 and 2 MoE layers before.
  static constexpr int kLookahead = 2;
  std::vector<std::array<std::vector<int32_t>, kLookahead>> guesses_;
};

}  // namespace ts
