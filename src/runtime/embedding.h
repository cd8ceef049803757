// Embeddings from a decoder's final hidden states (after the output norm; the LM head never
// runs): pooled as the model's files declare (model/pooling.h), then L2-normalised where they say
// so. A prompt may be fed in several chunks; the Pooler says which rows each chunk must hand back
// (SeqChunk::hidden) and folds them in.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/pooling.h"
#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "text/tokenizer.h"

namespace ts {

// The tokens an embedding model reads for `text`: BOS and EOS where its tokenizer adds them (a
// Qwen3-Embedding model's post-processor appends <|endoftext|>, whose state last-token pooling
// takes); control tokens written in the text become their ids, as transformers reads them.
std::vector<int32_t> embedding_tokens(const Tokenizer& tok, std::string_view text);

class Pooler {
 public:
  // An Unsupported error (the spec's why_none) when the model declares no pooling.
  Pooler(const EmbeddingSpec& spec, int64_t n_embd);

  // Sets `ch` (rows [from, from + ch.n) of a prompt of `total` tokens) to hand its hidden rows
  // to `buf` ([ch.n][n_embd] floats) when pooling needs any of them.
  void want(SeqChunk& ch, int64_t from, int64_t total, float* buf) const;
  // Folds in what a chunk set by want() received, after its pass.
  void add(const SeqChunk& ch, int64_t from);
  // The embedding of the whole prompt; the Pooler starts again for the next.
  std::vector<float> finish(int64_t total);

 private:
  EmbeddingSpec spec_;
  int64_t d_;
  std::vector<double> acc_;
};

// Embeds texts one at a time with a KV cache and forward pass of its own (`turbospark embed`; the
// server pools through its scheduler's slots).
class Embedder {
 public:
  Embedder(Engine& engine, const EmbeddingSpec& spec);

  // An Input error for an empty list, an id outside the vocabulary or more tokens than the
  // context.
  std::vector<float> embed(const std::vector<int32_t>& tokens);

 private:
  Engine& engine_;
  Pooler pooler_;
  KvCache kv_;
  Forward forward_;
  std::vector<float> rows_;
};

}  // namespace ts
