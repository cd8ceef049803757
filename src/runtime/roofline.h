// What a token costs the machine, counted from the model's tensors: the bytes a decode step must
// read and the arithmetic a token does. `turbospark bench` divides these by the measured memory
// bandwidth and compute peak (runtime/bandwidth.h) to state each figure as a fraction of its bound.
#pragma once

#include <cstdint>

#include "quant/dtype.h"

namespace ts {

struct ModelSpec;

struct DecodeBytes {
  uint64_t weights =
      0;  // every non-expert tensor a step reads (matrices, norms, head) + one embedding row
  uint64_t experts =
      0;          // top-k routed experts of every MoE layer, at the mean expert size of the layer
  double kv = 0;  // K and V rows the attention reads
  double total() const { return static_cast<double>(weights) + static_cast<double>(experts) + kv; }
};

// Bytes of one decode step whose attention sees `attended` cached positions (sliding-window
// layers see at most their window).
DecodeBytes decode_bytes(const ModelSpec& spec, DType kv_type, double attended);

// Arithmetic (2 per multiply-add) of `n` tokens appended after `n_past` cached ones in one feed:
// every matrix a token passes (top-k experts in MoE layers) and the head once (the bench asks for
// the last token's logits only), apart from the attention's q.k and p.v over the positions each
// token sees, which run in f32 whatever the weights' type.
struct FeedFlops {
  double matrix = 0;
  double attention = 0;
  double total() const { return matrix + attention; }
};
FeedFlops feed_flops(const ModelSpec& spec, int64_t n_past, int64_t n);

}  // namespace ts
