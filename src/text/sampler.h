// Picks the next token from a row of logits. The steps run in llama.cpp's default order: logit
// biases, then repetition / presence / frequency penalties on the raw logits, then top-k, top-p and
// min-p (judged on the untempered distribution), then temperature, then one draw from the seeded
// PRNG. Temperature <= 0 is greedy (argmax after the penalties; ties go to the lowest id).
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/rng.h"

namespace ts {

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;              // <= 0: off
  float top_p = 0.95f;             // >= 1: off
  float min_p = 0.05f;             // <= 0: off; keeps tokens with p >= min_p * p(best)
  float repeat_penalty = 1.0f;     // 1: off; divides positive logits, multiplies negative ones
  float presence_penalty = 0.0f;   // subtracted once from every token seen in the window
  float frequency_penalty = 0.0f;  // subtracted per occurrence in the window
  int32_t penalty_last_n = 64;     // window of recent tokens the penalties look at; -1: all
  uint64_t seed = 0;
  // (token id, bias): added to the token's raw logit before anything else; a bias of
  // -kBanBias or below (-inf too) bans the token, as OpenAI's -100 does.
  std::vector<std::pair<int32_t, float>> logit_bias;
};

inline constexpr float kBanBias = 100.0f;

class Sampler {
 public:
  // Checks the parameters (Usage error naming the bad one).
  explicit Sampler(const SamplerParams& params);

  // The next token id for this row of logits (one per vocabulary entry; not modified). A logit
  // bias for a token outside the row is an Input error.
  int32_t sample(std::span<const float> logits);
  // Records a token (prompt or generated) for the penalties.
  void accept(int32_t token);
  // Forgets the recorded tokens; the PRNG continues.
  void clear_history();

  const SamplerParams& params() const { return p_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  void apply_logit_bias(std::vector<Candidate>& c) const;
  void apply_penalties(std::vector<Candidate>& c) const;

  SamplerParams p_;
  Rng rng_;
  std::deque<int32_t> recent_;
  std::unordered_map<int32_t, int32_t> counts_;  // occurrences of each token in recent_
};

}  // namespace ts
