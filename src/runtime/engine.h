// Engine: an opened model placed on a backend. Resident weights (everything but routed experts)
// are read into backend memory once; routed experts live in the ExpertStore (resident or
// streamed). The footprint is announced at open and is what the memory gate checks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model_spec.h"
#include "moe/cache_policy.h"
#include "moe/expert_store.h"
#include "moe/moe_ffn.h"
#include "runtime/footprint.h"

namespace ts {

struct EngineOptions {
  std::string backend = "auto";  // auto | cpu | cuda
  int device = 0;
  int threads = 0;     // CPU threads; 0 = physical cores
  int64_t ctx = 4096;  // context of the sessions this engine will serve (for the footprint)
  DType kv_type = DType::F16;
  int64_t prefill_batch = 0;   // 0: the backend's and model's default (default_prefill_batch)
  int64_t expert_slots = 0;    // per MoE layer; 0 = resident
  uint64_t memory_budget = 0;  // bytes; derives expert_slots when set
  uint64_t ram_budget = 0;     // bytes of pinned host RAM caching streamed experts (device only)
  CachePolicyKind cache_policy = CachePolicyKind::Lru;
  bool expert_prefetch = false;  // predict the next MoE layer's experts and read them ahead
  ExpertIo expert_io = ExpertIo::Auto;  // how streamed experts are read (CPU)
  // Recurrent-state checkpoints each sequence holds (models with DeltaNet layers): what lets a
  // sequence return to an earlier position (a rejected lookup guess, a shared prompt prefix).
  int64_t state_checkpoints = kDefaultStateCheckpoints;
};

// A Gated DeltaNet mixer's weights: the input projections (the q/k/v channels of the convolution,
// the output gate z, the beta and alpha logits), the convolution's taps [channels][kernel], the
// per-value-head decay constants, the gated norm and the output projection.
struct DeltaNetWeights {
  Weight qkv, z, beta, alpha, out;
  const float* conv = nullptr;
  const float* a = nullptr;  // -exp(A_log)
  const float* dt_bias = nullptr;
  const float* norm = nullptr;
};

// A multi-head latent attention mixer's weights. q: through q_a and its norm (q LoRA) or straight
// from the layer's input (q_a.data null), split into the per-head non-rotated parts (q_nope,
// [heads][qk_nope] rows) and the rotated ones (q_pe, [heads][qk_rope] rows). kv_a: a token's cache
// row, its rope key rows first, then its latent. k_b and v_b: per head (n_heads equal row blocks),
// the latent-to-key map transposed ([kv_lora][qk_nope]) and the latent-to-value map
// ([v_head_dim][kv_lora]): what the absorbed form multiplies q and the attention's output by.
struct MlaWeights {
  Weight q_a, q_nope, q_pe, kv_a, k_b, v_b;
  const float* q_a_norm = nullptr;
  const float* kv_norm = nullptr;
};

// One layer's resident weights in backend memory. Norm vectors are f32.
struct LayerWeights {
  MixerKind mixer = MixerKind::Attention;
  const float* attn_norm = nullptr;
  // q, k and v of one type and width are stored stacked, as one matrix `wqkv` of which wq, wk
  // and wv are views: one matmul then computes all three for a token (decode), with one launch and
  // one pass over the activations. wqkv.data is null when they can't be stacked. Likewise
  // ffn_gate_up for the dense FFN's gate and up. An output-gated attention stacks its gate rows
  // last: wqkv is [q | k | v | gate].
  Weight wqkv, ffn_gate_up;
  Weight wq, wk, wv, wo, wgate;
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* bo = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* attn_post_norm = nullptr;
  const float* ffn_norm = nullptr;
  const float* ffn_post_norm = nullptr;
  Weight ffn_gate, ffn_up, ffn_down;  // dense layers
  MoeLayerWeights routed;             // MoE layers: the router and the shared expert
  DeltaNetWeights delta;
  MlaWeights mla;
  bool moe = false;
  RopeArgs rope;
  AttentionArgs attn;
  // Gemma 4. The weightless v norm (ones of head_dim); the per-layer input's gate, projection and
  // norm; the scalar on the layer's output (1: none). An MoE layer's dense FFN beside its routed
  // experts: the dense branch's post norm, the routed branch's pre and post norms, and the
  // router's input norm weight (its scale times n_embd^-1/2).
  const float* v_norm = nullptr;
  Weight ple_gate, ple_proj;
  const float* ple_norm = nullptr;
  float out_scale = 1.0f;
  const float* ffn_post_norm_1 = nullptr;
  const float* ffn_pre_norm_2 = nullptr;
  const float* ffn_post_norm_2 = nullptr;
  const float* router_norm = nullptr;
};

class Engine {
 public:
  static std::unique_ptr<Engine> open(const std::string& path, const EngineOptions& options);
  // On `backend` instead of the one options.backend names (tests: a host backend that poses as a
  // device backend).
  static std::unique_ptr<Engine> open(const std::string& path, const EngineOptions& options,
                                      std::unique_ptr<Backend> backend);
  ~Engine();

  const ModelSpec& spec() const { return *spec_; }
  const ArchConfig& cfg() const { return spec_->cfg; }
  const EngineOptions& options() const { return options_; }
  Backend& backend() { return *backend_; }
  ExpertStore& experts() { return *experts_; }
  const Footprint& footprint() const { return footprint_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const Weight& token_embd() const { return token_embd_; }
  const Weight& output() const { return output_; }
  const float* output_norm() const { return output_norm_; }
  // Per-layer embeddings (Gemma 4; data null without): the table (a host backend reads it where
  // the file is mapped), the projection of the token embedding and its per-layer norm.
  const Weight& per_layer_embd() const { return per_layer_embd_; }
  const Weight& per_layer_model_proj() const { return per_layer_model_proj_; }
  const float* per_layer_proj_norm() const { return per_layer_proj_norm_; }

 private:
  Engine() = default;
  void load_weights();
  Weight load_matrix(const TensorRef& t);
  // The tensors stacked into one weight (same type, width and row bytes), `views` set to each
  // part of it; Weight{} (nothing read) when they differ.
  Weight load_stacked(const std::vector<const TensorRef*>& parts,
                      const std::vector<Weight*>& views);
  // load_stacked() of parts that are each a list of row runs (rows taken apart and regrouped).
  // One segment always loads: it is its weight's only view.
  Weight load_segments(const std::vector<std::vector<TensorRef>>& segments,
                       const std::vector<Weight*>& views);
  void load_attention(const LayerIndex& I, LayerWeights& L);
  void load_delta_net(const LayerIndex& I, LayerWeights& L);
  void load_mla(const LayerIndex& I, LayerWeights& L);
  // HF's kv_b_proj: of each head's rows [first, first + rows), the transpose, as one weight of
  // heads x [cols][rows] (the k_b layout llama.cpp's converter writes).
  Weight load_transposed_heads(const TensorRef& t, int64_t heads, int64_t first, int64_t rows);
  void load_shared_expert(const LayerIndex& I, LayerWeights& L);
  void load_expert_biases(const LayerIndex& I, MoeLayerWeights& W);
  // Reads the tensors' rows, end to end, into one weight of the first one's type and row bytes.
  Weight upload_rows(const std::vector<const TensorRef*>& parts);
  // Places `buf` (from backend_->alloc() on a host backend, else malloc()) as a weight; takes it.
  Weight place_weight(DType dtype, int64_t rows, int64_t cols, size_t row_stride, void* buf);
  // A buffer for place_weight().
  void* weight_buffer(uint64_t bytes, const std::string& what);
  // A float tensor of any shape, every element, as f32 in backend memory; `map` (if given)
  // transforms each value on the way.
  const float* load_vector(const TensorRef* t, float (*map)(float) = nullptr);
  std::vector<float> read_floats(const TensorRef& t);
  const float* upload_floats(const std::vector<float>& f);
  const float* upload_inv_freq(bool sliding);
  std::vector<float> rope_freqs_divisors();
  // Gemma 4's pieces of layer l beyond the llama-style ones, and its per-layer embeddings.
  void load_gemma4_layer(int64_t l, const LayerIndex& I, LayerWeights& L);
  void load_per_layer_embd();

  std::unique_ptr<ModelSpec> spec_;
  EngineOptions options_;
  std::unique_ptr<Backend> backend_;
  Footprint footprint_;
  std::vector<void*> owned_;            // backend buffers this engine allocated
  std::vector<uint8_t> mrope_streams_;  // M-RoPE's stream of each frequency pair (host)
  std::vector<Weight> uploaded_;
  Weight token_embd_, output_;
  const float* output_norm_ = nullptr;
  Weight per_layer_embd_, per_layer_model_proj_;
  const float* per_layer_proj_norm_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::unique_ptr<ExpertStore> experts_;
};

// Picks the backend named by `name` (auto: cuda when a device is present, else cpu).
std::unique_ptr<Backend> make_backend(const std::string& name, int device, int threads);

}  // namespace ts
