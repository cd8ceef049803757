#include "model/synth_vocab.h"

#include <cstdio>
#include <string>

#include "core/error.h"
#include "formats/gguf_writer.h"

namespace ts {
namespace {

// SentencePiece token types, as GGUF stores them.
constexpr int64_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;
constexpr int64_t kFirstPiece = 3 + 256;

// Bijective base-26 letters of k: a..z, aa..zz, aaa, ...
std::string letters(int64_t k) {
  std::string s;
  for (++k; k > 0; k = (k - 1) / 26) s.insert(s.begin(), static_cast<char>('a' + (k - 1) % 26));
  return s;
}

}  // namespace

void add_synth_vocab(GgufWriter& w, int64_t vocab) {
  if (vocab < kFirstPiece + 26)
    fail(ErrorKind::Usage, "synthetic vocabulary: " + std::to_string(vocab) +
                               " tokens is fewer than the " + std::to_string(kFirstPiece + 26) +
                               " it needs");
  GgufArray tokens, scores, types;
  tokens.elem = GgufType::String;
  scores.elem = GgufType::F32;
  types.elem = GgufType::I32;
  auto add = [&](std::string piece, double score, int64_t type) {
    tokens.strings.push_back(std::move(piece));
    scores.floats.push_back(score);
    types.ints.push_back(type);
  };
  add("<unk>", 0, kUnknown);
  add("<s>", 0, kControl);
  add("</s>", 0, kControl);
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    add(piece, 0, kByte);
  }
  // Single letters first (so every letter is reachable), then longer pieces, alternating between
  // word-initial and inner forms; a lower score merges later.
  for (int64_t id = kFirstPiece; id < vocab; ++id) {
    const int64_t k = id - kFirstPiece;
    const std::string piece =
        k < 26 ? letters(k) : (k % 2 ? "" : "\u2581") + letters(26 + (k - 26) / 2);
    add(piece, -static_cast<double>(k), kNormal);
  }
  w.add_kv("tokenizer.ggml.model", gguf_string("llama"));
  w.add_kv("tokenizer.ggml.pre", gguf_string("default"));
  w.add_kv("tokenizer.ggml.tokens", gguf_array(std::move(tokens)));
  w.add_kv("tokenizer.ggml.scores", gguf_array(std::move(scores)));
  w.add_kv("tokenizer.ggml.token_type", gguf_array(std::move(types)));
  w.add_kv("tokenizer.ggml.bos_token_id", gguf_int(GgufType::U32, 1));
  w.add_kv("tokenizer.ggml.eos_token_id", gguf_int(GgufType::U32, 2));
  w.add_kv("tokenizer.ggml.unknown_token_id", gguf_int(GgufType::U32, 0));
  w.add_kv("tokenizer.ggml.add_bos_token", gguf_int(GgufType::Bool, 1));
  w.add_kv("tokenizer.ggml.add_eos_token", gguf_int(GgufType::Bool, 0));
}

}  // namespace ts
