// SeqChunk: the rows one sequence contributes to a forward pass.
#pragma once

#include <cstdint>

namespace ts {

class KvCache;

// What a multimodal prompt gives its rows besides their token ids (host memory, one entry a row;
// any may be null). rope_pos: [n][3] M-RoPE positions (T, H, W), else each row's position is
// n_past + i shifted by the cache's rope_shift(); embeds: per row nullptr (the token's embedding)
// or n_embd floats that replace it (an image token's vision feature); deepstack: per row nullptr
// or [n_deepstack][n_embd] floats added to the row's hidden state after layers 0, 1, ...
struct RowInputs {
  const int32_t* rope_pos = nullptr;
  const float* const* embeds = nullptr;
  const float* const* deepstack = nullptr;

  bool any() const { return rope_pos != nullptr || embeds != nullptr || deepstack != nullptr; }
  // The same inputs from row i on.
  RowInputs from(int64_t i) const {
    return {rope_pos ? rope_pos + 3 * i : nullptr, embeds ? embeds + i : nullptr,
            deepstack ? deepstack + i : nullptr};
  }
};

// `n` tokens of one sequence, appended after kv->n_past(). `logits` (host) receives the logits of
// every row ([n][vocab]) when all_rows, else of the last row only; nullptr: none wanted. Or, with
// `targets` set (and logits null), rows [score_from, score_to) are scored where their logits are
// (Backend::nll_rows): nll[i] (host) = -log softmax(row score_from + i)[targets[i]].
// Or, with `hidden` set (and logits, targets null), it receives the final hidden state after the
// output norm ([n][n_embd] when all_rows, else the last row's), what an embedding pools; such
// rows skip the head.
struct SeqChunk {
  KvCache* kv = nullptr;
  const int32_t* tokens = nullptr;
  int64_t n = 0;
  float* logits = nullptr;
  bool all_rows = false;
  const int32_t* targets = nullptr;
  int64_t score_from = 0, score_to = 0;
  double* nll = nullptr;
  float* hidden = nullptr;
  RowInputs in{};
};

}  // namespace ts
