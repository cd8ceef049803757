#include "server/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ts::server {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int n_top) {
  // log softmax = logit - (max + log sum exp(logit - max)); summed in double so that a vocabulary
  // of 150k entries does not lose the small terms.
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - mx);
  const double lse = mx + std::log(sum);
  const auto lp = [&](int32_t id) {
    return static_cast<float>(logits[static_cast<size_t>(id)] - lse);
  };
  TokenLogprobs out;
  out.chosen = {chosen, lp(chosen)};
  const size_t n = std::min(static_cast<size_t>(std::max(n_top, 0)), logits.size());
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const float la = logits[static_cast<size_t>(a)],
                                  lb = logits[static_cast<size_t>(b)];
                      return la > lb || (la == lb && a < b);
                    });
  for (size_t i = 0; i < n; ++i) out.top.push_back({ids[i], lp(ids[i])});
  return out;
}

}  // namespace ts::server
