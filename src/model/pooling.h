// How an embedding model turns its final hidden states into one vector, as its files declare it:
// GGUF `<arch>.pooling_type` (llama.cpp's enum: none 0, mean 1, cls 2, last 3, rank 4) or, in a
// Hugging Face directory, the sentence-transformers modules (modules.json naming a Pooling module
// whose config.json sets pooling_mode_*, and a Normalize module).
#pragma once

#include <string>

namespace ts {

class ModelSource;

enum class Pooling { None, Mean, Cls, Last };
const char* pooling_name(Pooling p);

struct EmbeddingSpec {
  Pooling pooling = Pooling::None;
  // L2-normalise the pooled vector: a Normalize module in a HF directory; always for GGUF, whose
  // metadata cannot say, as llama.cpp's server and llama-embedding do by default.
  bool normalize = false;
  // With Pooling::None: why the model is not an embedding model, for the one-line refusal.
  std::string why_none;
};

// A Model error names the file when the metadata is there but malformed or of a kind not served
// (rank pooling is a reranker's).
EmbeddingSpec read_embedding_spec(const ModelSource& source);

}  // namespace ts
