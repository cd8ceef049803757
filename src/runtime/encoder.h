// An encoder stack (LayerStack::Encoder: BERT, nomic-bert) on the CPU: a batch of texts at once,
// every token attending to every other token of its own text. The embeddings are the token's and
// token type 0's (and its position's, where positions are learned), LayerNormed; each layer is
//
//   x = LayerNorm(x + o(attention(q(x), k(x), v(x))))
//   x = LayerNorm(x + ffn(x))
//
// q and k rotated where positions are rotary, ffn(x) = down(gelu(up(x))) or
// down(silu(gate(x)) * up(x)) (EncoderFfn), with biases on the projections where the model has
// them (EncoderConfig). The texts of a batch lie one after the other as rows: every projection,
// norm and activation runs over all of them at once (the weights are read once a pass), attention
// over each text's rows alone. Its final hidden states are what an embedding pools. A device
// backend is refused: the encoder has no ops there yet.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "model/arch_config.h"
#include "model/model_source.h"
#include "runtime/embedding.h"
#include "runtime/host_weights.h"

namespace ts {

class Encoder {
 public:
  // Opens `path` (whose family is an encoder) with `threads` CPU threads (0: physical cores);
  // `backend` is the --backend flag (auto runs on the CPU, cuda is refused). Errors name the file
  // and the tensor or field at fault.
  static std::unique_ptr<Encoder> open(const std::string& path, const std::string& backend,
                                       int threads);
  ~Encoder();

  const ArchConfig& cfg() const { return c_; }
  const ModelSource& source() const { return *source_; }
  // hidden() and embed() run on the encoder's one thread pool: one caller at a time (the
  // server's EncoderScheduler calls them from its thread only).
  // An Input error for a text the encoder cannot take: no tokens, an id outside the vocabulary
  // or more tokens than the positions.
  void check(const std::vector<int32_t>& tokens) const;
  // The final hidden states of the texts' tokens, their rows one after the other
  // ([total tokens][n_embd]); check()'s errors for any text.
  std::vector<float> hidden(std::span<const std::vector<int32_t>> texts) const;
  std::vector<float> hidden(const std::vector<int32_t>& tokens) const {
    return hidden({&tokens, 1});
  }
  // Each text's embedding: its hidden states pooled by `pooler`.
  std::vector<std::vector<float>> embed(std::span<const std::vector<int32_t>> texts,
                                        Pooler& pooler) const;
  std::vector<float> embed(const std::vector<int32_t>& tokens, Pooler& pooler) const {
    return std::move(embed({&tokens, 1}, pooler).front());
  }
  // The weights' bytes, and those of the buffers of a pass over `rows` rows (its result included).
  uint64_t weight_bytes() const { return weight_bytes_; }
  // The type of its layers' matrices (the first FFN's: a file mixes types little).
  DType matrix_type() const { return layers_.front().up.w.dtype; }
  uint64_t workspace_bytes(int64_t rows) const;

 private:
  using Linear = HostWeights::Linear;
  using Norm = HostWeights::Norm;
  struct Layer {
    Linear q, k, v, o, up, gate, down;  // gate: EncoderFfn::SwiGlu only
    Norm attn_norm, out_norm;
  };
  Encoder() = default;
  void load();
  void norm(const Norm& n, int64_t rows, float* x) const;
  // x [rows][n_embd] -> out [rows][n_embd] through the layer's FFN; ff and g [rows][n_ff] scratch.
  void ffn(const Layer& L, const float* x, int64_t rows, float* ff, float* g, float* out) const;

  std::unique_ptr<ModelSource> source_;
  ArchConfig c_;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<ThreadPool> pool_;
  Weight tokens_, positions_, types_;  // positions_: EncoderPositions::Learned only
  std::vector<float> inv_freq_;        // EncoderPositions::Rotary only
  Norm embd_norm_;
  std::vector<Layer> layers_;
  uint64_t weight_bytes_ = 0;
};

}  // namespace ts
