// The forward driver: one pass of the generic transformer block over a micro-batch of rows that
// may come from several sequences (each with its own KV cache and position). Matmuls run over
// all rows at once; attention runs per sequence. Every family goes through this code, driven by
// ArchConfig; only the FFN half differs between dense and MoE layers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/engine.h"
#include "runtime/footprint.h"
#include "runtime/kv_cache.h"
#include "runtime/seq_chunk.h"

namespace ts {

class DeltaNetMixer;

class Forward {
 public:
  // The head computes the logits of at most head_rows rows at a time (kHeadRows; a test lowers
  // it to exercise the chunks on a short prompt).
  Forward(Engine& engine, int64_t max_rows, int64_t head_rows = kHeadRows);
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;

  int64_t max_rows() const { return max_rows_; }
  // Runs the chunks (at most max_rows() tokens in all) and advances each chunk's kv->n_past.
  void run(const std::vector<SeqChunk>& chunks);

 private:
  // Queues the layers from the embedding (from = -1) or from layer `from`'s experts (its routing
  // read back, its experts present), up to layer `stop`'s routing (queued back to routed_ids_)
  // or through the last layer (stop = n_layer).
  void layers(const std::vector<SeqChunk>& chunks, int64_t M, int64_t from, int64_t stop);
  // The first MoE layer after `from` whose experts stream, or n_layer.
  int64_t next_streamed_layer(int64_t from) const;
  // Makes the experts in routed_ids_ present for layer l and points its table at them.
  void fetch_streamed_experts(int64_t l);
  // Layer l's router over h_ and its top-k: ids [M][k] (int32), then weights [M][k], at out.
  void route(int64_t l, int64_t M, float* out);
  // Whether, when layer l's routing is read back, the next streamed layer's is guessed with it
  // (prefetching on a device backend: route() of that layer into predicted_, one token).
  bool predicts_next(int64_t l) const;
  // Layer l's token mixer over h_ into o_.
  void mix(int64_t l, const std::vector<SeqChunk>& chunks, int64_t M);
  void attention_block(int64_t l, const std::vector<SeqChunk>& chunks, int64_t M);
  // Layer l's k and v rows (rotated) into the caches and the attention of the q rows into att_.
  void store_and_attend(int64_t l, const std::vector<SeqChunk>& chunks, int64_t M, const float* q,
                        const float* k, const float* v);
  void ffn_dense(int64_t l, int64_t M);
  Glu glu_kind() const;
  void ffn_moe(int64_t l, int64_t M);
  // o_ += the layer's shared expert over h_ (scaled by its sigmoid gate when it has one).
  void shared_expert(int64_t l, int64_t M);
  // Gate / up, the activation and down of G experts over their runs of the routed rows: group g
  // takes rows [row0[g], row0[g] + rows[g]) of rows_, the runs consecutive and ascending.
  void experts_ffn(const ExpertWeights* const* ew, const int64_t* row0, const int64_t* rows,
                   int64_t G);
  // True when the routed experts of an M-row pass run on the device by expert id (one token, or
  // a batched decode step over resident experts, on a backend that indexes them, every MoE layer
  // with a table), without grouping on the host.
  bool experts_indexed(int64_t M) const;
  void prefetch_next_layer(int64_t l, int64_t M);
  // x_ += the last FFN's output (o_, or its routed rows), then h_ = rms_norm(x_) with weight w.
  void add_ffn_out_norm(const float* w, int64_t M);
  // Sums routed rows the last FFN left into o_ (for ops that read o_ itself).
  void sum_routed_rows(int64_t M);
  // The output norm over the rows listed in wanted_rows_ (into h_), then head_logits(0).
  void head(int64_t M);
  // The logits of wanted rows [r0, r0 + head_rows_) (fewer at the end) into logits_.
  void head_logits(int64_t r0);
  // Copies those rows from logits_ to the chunks' host buffers, or scores them.
  void copy_logits(const std::vector<SeqChunk>& chunks, int64_t r0);
  float* scratch(size_t floats);

  Engine& engine_;
  Backend& b_;
  const ArchConfig& c_;
  int64_t max_rows_, head_rows_;
  std::vector<void*> buffers_;
  std::vector<int32_t> ids_, pos_, wanted_rows_;
  // activations, [max_rows][width] in backend memory; k_ and v_ point into q_'s buffer, ff_up_
  // into ff_gate_'s (see the constructor)
  float *x_ = nullptr, *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *att_ = nullptr,
        *o_ = nullptr;
  float* gate_ = nullptr;  // the attention's output gate, [max_rows][q width] (gated models)
  std::unique_ptr<DeltaNetMixer> delta_net_;  // models with DeltaNet layers
  float *ff_gate_ = nullptr, *ff_up_ = nullptr, *ff_act_ = nullptr, *ff_out_ = nullptr,
        *rows_ = nullptr;
  float* router_ = nullptr;
  float* logits_ = nullptr;         // [min(max_rows, head_rows)][n_vocab]
  bool experts_on_device_ = false;  // every MoE layer's experts resident and indexed on the device
  // The pass is a batched decode step: at most kDecodeStepRows chunks of one token each (run()).
  bool decode_step_ = false;
  // [n_layer][kDecodeStepRows]: each layer's caches of a decode step's sequences, in their order
  // (run() fills them every step of several sequences: a recorded step re-reads them).
  std::vector<KvView> step_kv_;
  float* routing_ = nullptr;  // ids [M][k] (int32), then weights [M][k]; backend memory
  // The last FFN's output is still its routed experts' rows (ff_out_, by routing_), not yet
  // summed into o_: the norm after it sums and adds them in one op (add_ffn_out_norm()).
  bool ffn_out_routed_ = false;
  float* predicted_ = nullptr;  // the next streamed layer's guessed routing, like routing_
  // One token's k ids read back (alloc_host_pinned), then the k predicted for the next layer.
  int32_t* routed_ids_ = nullptr;
  std::vector<float> router_host_;
  std::vector<float> routing_host_;
  std::vector<int32_t> ids_host_;
  // ffn_moe's routed rows in expert-major order: the token and weight of each, and per routed
  // expert its id, first row and row count
  std::vector<int32_t> routed_src_, expert_ids_;
  std::vector<float> routed_scale_;
  std::vector<int64_t> group_row0_, group_rows_;
  std::vector<const ExpertWeights*> group_weights_;
  std::vector<const void*> group_ptrs_;
};

}  // namespace ts
