// An encoder stack (LayerStack::Encoder: BERT) on the CPU: one text at a time, every token
// attending to every other. The embeddings are the token's, its position's and token type 0's,
// LayerNormed; each layer is
//
//   x = LayerNorm(x + o(attention(q(x), k(x), v(x))))
//   x = LayerNorm(x + down(gelu(up(x))))
//
// with biases on every projection. Its final hidden states are what an embedding pools. A device
// backend is refused: the encoder has no ops there yet.
#pragma once

#include <cstdint>
#include <memory>
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
  // The final hidden states of one text's tokens, [tokens.size()][n_embd]. An Input error for no
  // tokens, an id outside the vocabulary or more tokens than the positions.
  std::vector<float> hidden(const std::vector<int32_t>& tokens) const;
  // The text's embedding: its hidden states pooled by `pooler`.
  std::vector<float> embed(const std::vector<int32_t>& tokens, Pooler& pooler) const;

 private:
  using Linear = HostWeights::Linear;
  using Norm = HostWeights::Norm;
  struct Layer {
    Linear q, k, v, o, up, down;
    Norm attn_norm, out_norm;
  };
  Encoder() = default;
  void load();
  void apply(const Linear& l, const float* x, int64_t rows, float* y) const;
  void norm(const Norm& n, int64_t rows, float* x) const;

  std::unique_ptr<ModelSource> source_;
  ArchConfig c_;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<ThreadPool> pool_;
  Weight tokens_, positions_, types_;
  Norm embd_norm_;
  std::vector<Layer> layers_;
};

}  // namespace ts
