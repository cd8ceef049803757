// Top-k expert selection from router logits, by the family's scoring rule.
#pragma once

#include <cstdint>

#include "model/arch_config.h"

namespace ts {

struct RouterArgs {
  RouterScoring scoring = RouterScoring::None;
  int64_t n_expert = 0;
  int64_t k = 0;
  bool norm_topk = false;
  const float* bias = nullptr;  // SigmoidBiasTopk: per-expert selection bias (host)
};

// Writes k expert ids (ascending score order is not promised) and their weights.
void route_token(const float* logits, const RouterArgs& a, int32_t* experts, float* weights);

}  // namespace ts
