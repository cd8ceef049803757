// Log-probabilities of a sampled token and of the most likely alternatives, from the raw logits
// (the model's distribution before penalties and temperature, as OpenAI reports them).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ts::server {

struct TokenProb {
  int32_t id = 0;
  float logprob = 0;
};

struct TokenLogprobs {
  TokenProb chosen;
  std::vector<TokenProb> top;  // most likely first; ties: lower id first
};

// The largest `top` count a request may ask for (OpenAI's limit for chat completions).
constexpr int kMaxTopLogprobs = 20;

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int n_top);

}  // namespace ts::server
