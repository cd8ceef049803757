// The forward driver: one pass over a micro-batch of rows that may come from several sequences
// (each with its own state and position). Every layer is norm -> token mixer -> norm -> FFN, the
// mixer and the FFN chosen per layer at open (runtime/mixers/: attention, Gated DeltaNet, MLA; a
// dense GLU here, routed experts in moe/moe_ffn.h). Matmuls run over all rows at once; what depends
// on a sequence's past (attention over its rows, the recurrence over its state) runs per sequence.
// Every family goes through this code, driven by ArchConfig.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/partition.h"
#include "runtime/engine.h"
#include "runtime/footprint.h"
#include "runtime/kv_cache.h"
#include "runtime/seq_chunk.h"

namespace ts {

class AttentionMixer;
class DeltaNetMixer;
class ExpertParallelFfn;
class MediaRows;
class MlaMixer;
class Mixer;
class MoeFfn;
class PerLayerInputs;

class Forward {
 public:
  // The head computes the logits of at most head_rows rows at a time (kHeadRows; a test lowers
  // it to exercise the chunks on a short prompt).
  Forward(Engine& engine, int64_t max_rows, int64_t head_rows = kHeadRows);
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;

  int64_t max_rows() const { return max_rows_; }
  // Runs the chunks (at most max_rows() tokens in all) and advances each chunk's cache.
  void run(const std::vector<SeqChunk>& chunks);
  // From now on this pass is one rank of expert parallelism (docs/PARALLEL.md): its MoE layers run
  // only the experts `place` gives comm.rank(), every other rank running the same passes.
  void expert_parallel(Communicator& comm, ExpertPlacement place);

 private:
  // Queues the layers from the embedding (from = -1) or from layer `from`'s experts (its routing
  // read back, its experts present), up to layer `stop`'s routing (queued back to the host) or
  // through the last layer (stop = n_layer).
  void layers(const std::vector<SeqChunk>& chunks, int64_t M, int64_t from, int64_t stop);
  void ffn_dense(int64_t l, int64_t M);
  // Gemma 4's MoE layer: the dense FFN over h_ beside the routed experts over the residual
  // stream x_ (each branch normed before and after), summed into o_; in two halves, the dense FFN
  // and the routing, then the experts, so that a streamed step's piece can end between them.
  void dense_ffn_then_route(int64_t l, int64_t M);
  void experts_beside_dense_ffn(int64_t l, int64_t M);
  // Layer l's routed experts (routed already) over h into out: this rank's under expert
  // parallelism, else all of them.
  void run_experts(int64_t l, const float* h, int64_t M, float* out);
  // Gemma 4's end of layer l: x_ += o_, the per-layer input, x_ *= the layer's scalar; o_ zeroed
  // (the next norm adds it).
  void layer_tail(int64_t l, int64_t M);
  Glu glu_kind() const;
  // x_ += the last FFN's output, then h_ = rms_norm(x_) with weight w.
  void add_ffn_out_norm(const float* w, int64_t M);
  // The output norm over the rows listed in wanted_rows_ (into h_), then head_logits(0).
  void head(int64_t M);
  // The logits of wanted rows [r0, r0 + head_rows_) (fewer at the end) into logits_.
  void head_logits(int64_t r0);
  // Copies those rows from logits_ to the chunks' host buffers, or scores them.
  void copy_logits(const std::vector<SeqChunk>& chunks, int64_t r0);
  // Copies the normed hidden rows (after the logits' rows in h_) to the chunks that want them.
  void copy_hidden(const std::vector<SeqChunk>& chunks);
  float* scratch(size_t floats);

  Engine& engine_;
  Backend& b_;
  const ArchConfig& c_;
  int64_t max_rows_, head_rows_;
  std::vector<void*> buffers_;
  std::vector<int32_t> ids_, pos_, wanted_rows_;
  int64_t head_wanted_ = 0;        // wanted_rows_ that go through the head (the rest: hidden rows)
  std::vector<int32_t> rope_pos_;  // [max_rows][3] with M-RoPE: each row's T, H, W positions
  bool media_ = false;             // a chunk of the pass has RowInputs embeddings or DeepStack
  std::unique_ptr<MediaRows> media_rows_;
  // activations, [max_rows][width] in backend memory: the residual stream, its norm, a block's
  // output; the FFN-wide buffers (ff_up_ points into ff_gate_'s: a stacked matmul writes each row
  // as [gate | up]), and max_rows x top-k rows of the gathered input and the experts' output
  float *x_ = nullptr, *h_ = nullptr, *o_ = nullptr;
  float *ff_gate_ = nullptr, *ff_up_ = nullptr, *ff_act_ = nullptr, *ff_rows_ = nullptr,
        *ff_out_ = nullptr;
  float* logits_ = nullptr;  // [min(max_rows, head_rows)][n_vocab]
  // The pass is a batched decode step: at most kDecodeStepRows chunks of one token each (run()).
  bool decode_step_ = false;
  // The token mixers the model has, and each layer's.
  std::unique_ptr<AttentionMixer> attention_;
  std::unique_ptr<DeltaNetMixer> delta_net_;
  std::unique_ptr<MlaMixer> mla_;
  std::vector<Mixer*> mixers_;
  std::unique_ptr<MoeFfn> moe_;                         // MoE models
  std::unique_ptr<ExpertParallelFfn> expert_parallel_;  // one rank of several
  std::unique_ptr<PerLayerInputs> per_layer_;           // per-layer embeddings (Gemma 4 E2B / E4B)
  // The routed branch's input and output beside a dense FFN (Gemma 4 MoE), [max_rows][n_embd].
  float *h2_ = nullptr, *o2_ = nullptr;
};

}  // namespace ts
