// SeqChunk: the rows one sequence contributes to a forward pass.
#pragma once

#include <cstdint>

namespace ts {

class KvCache;

// `n` tokens of one sequence, appended after kv->n_past(). `logits` (host) receives the logits of
// every row ([n][vocab]) when all_rows, else of the last row only; nullptr: none wanted. Or, with
// `targets` set (and logits null), rows [score_from, score_to) are scored where their logits are
// (Backend::nll_rows): nll[i] (host) = -log softmax(row score_from + i)[targets[i]].
struct SeqChunk {
  KvCache* kv = nullptr;
  const int32_t* tokens = nullptr;
  int64_t n = 0;
  float* logits = nullptr;
  bool all_rows = false;
  const int32_t* targets = nullptr;
  int64_t score_from = 0, score_to = 0;
  double* nll = nullptr;
};

}  // namespace ts
