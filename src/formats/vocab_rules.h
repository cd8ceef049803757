// What a model class of llama.cpp's converter says about how its tokenizer becomes GGUF keys:
// filled by model/ (convert_model.h, per family) and read by text/ (convert_vocab.h), which sit
// on either side of this layer.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ts {

struct VocabRules {
  std::string bpe_pre;  // tokenizer.ggml.pre of a byte-level BPE tokenizer.json
  // {type, token text}: special ids the class sets from the added tokens when the files did not
  // (GLM-4.5: bos is "[gMASK]").
  std::vector<std::pair<std::string, std::string>> special;
  bool no_space_prefix = false;       // SentencePiece vocabularies: add_space_prefix = false
  bool add_prefix_space_key = false;  // tokenizer_config's add_prefix_space becomes the key
  int64_t n_vocab = 0;                // config's vocab_size (0: the tokenizer's own count)
  // Non-empty: tokenizer.json read as gguf-py's LlamaHfVocab (a byte-fallback BPE, tokenizer.model
  // ignored) and written with this tokenizer.ggml.model and its merges (Gemma 4: "gemma4").
  std::string llama_hf_model;
  std::vector<std::string> user_defined;  // tokens the class marks user-defined (always shown)
  bool add_bos = false;                   // the class sets add_bos_token true
  // A WordPiece tokenizer.json in BERT's phantom-space form (word starts marked with U+2581,
  // "##" continuations bare), after tokenizer.ggml.token_type_count.
  bool wordpiece = false;
  int64_t token_type_count = 1;
  // XLM-R's sentencepiece.bpe.model (a Unigram) in fairseq's id order, as tokenizer.ggml.model
  // "t5" with its scores, whitespace flags and precompiled charsmap, after token_type_count.
  bool xlm_roberta = false;
};

}  // namespace ts
