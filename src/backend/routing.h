// Top-k expert selection from router logits, by a scoring rule the family picks: the op
// vocabulary of Backend::route(), and its host implementation (route_token), which the CPU and
// the host-side guesses of expert prefetching use.
#pragma once

#include <cstdint>

namespace ts {

enum class RouterScoring {
  None,             // dense model
  TopkSoftmax,      // Mixtral: top-k of the logits, softmax over the k selected
  SoftmaxTopk,      // Qwen3-MoE: softmax over all experts, then top-k (renormalised if asked)
  SigmoidBiasTopk,  // MiniMax-M2: sigmoid; a correction bias picks experts, weights stay unbiased
  // DeepSeek-V3: as SigmoidBiasTopk, the choice limited to the topk_group best of n_group equal
  // groups of experts, a group scored by the sum of its two best biased scores
  SigmoidGroupTopk
};
const char* router_scoring_name(RouterScoring r);

struct RouterArgs {
  RouterScoring scoring = RouterScoring::None;
  int64_t n_expert = 0;
  int64_t k = 0;
  bool norm_topk = false;
  const float* bias = nullptr;  // Sigmoid*Topk: per-expert selection bias (host)
  int64_t n_group = 1;          // SigmoidGroupTopk: groups of n_expert / n_group experts
  int64_t topk_group = 1;       // SigmoidGroupTopk: groups the k experts are chosen from
  float scale = 1.0f;           // multiplies the k weights, after any renormalisation
  // Per expert, a factor on its weight after renormalisation and scale (Gemma 4's
  // per_expert_scale); null: none. Host memory for route_token, backend memory for route().
  const float* expert_scale = nullptr;
};

// Writes k expert ids (ascending score order is not promised) and their weights.
void route_token(const float* logits, const RouterArgs& a, int32_t* experts, float* weights);

}  // namespace ts
