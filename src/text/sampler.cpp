#include "text/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace ts {
namespace {

// Highest logit first; equal logits by id, so the order (and the draw) never depends on the
// sort implementation.
bool before(float la, int32_t ia, float lb, int32_t ib) {
  return la > lb || (la == lb && ia < ib);
}

}  // namespace

Sampler::Sampler(const SamplerParams& params) : p_(params), rng_(params.seed) {
  const auto bad = [](const std::string& what) { fail(ErrorKind::Usage, "sampler: " + what); };
  if (!std::isfinite(p_.temperature)) bad("temperature must be a finite number");
  if (!(p_.top_p > 0.0f) || p_.top_p > 1.0f)
    bad("top-p must be in (0, 1], got " + std::to_string(p_.top_p));
  if (!(p_.min_p >= 0.0f) || p_.min_p > 1.0f)
    bad("min-p must be in [0, 1], got " + std::to_string(p_.min_p));
  if (!(p_.repeat_penalty > 0.0f))
    bad("repeat penalty must be > 0, got " + std::to_string(p_.repeat_penalty));
  if (!std::isfinite(p_.presence_penalty) || !std::isfinite(p_.frequency_penalty))
    bad("penalties must be finite");
  if (p_.penalty_last_n < -1)
    bad("penalty window must be >= -1, got " + std::to_string(p_.penalty_last_n));
}

void Sampler::accept(int32_t token) {
  if (p_.penalty_last_n == 0) return;
  recent_.push_back(token);
  ++counts_[token];
  if (p_.penalty_last_n > 0 && recent_.size() > static_cast<size_t>(p_.penalty_last_n)) {
    const int32_t old = recent_.front();
    recent_.pop_front();
    if (--counts_[old] == 0) counts_.erase(old);
  }
}

void Sampler::clear_history() {
  recent_.clear();
  counts_.clear();
}

void Sampler::apply_penalties(std::vector<Candidate>& c) const {
  const bool off =
      p_.repeat_penalty == 1.0f && p_.presence_penalty == 0.0f && p_.frequency_penalty == 0.0f;
  if (off) return;
  for (const auto& [id, n] : counts_) {
    if (id < 0 || id >= static_cast<int32_t>(c.size())) continue;  // a token outside this vocab
    float& l = c[id].logit;
    l = l <= 0.0f ? l * p_.repeat_penalty : l / p_.repeat_penalty;
    l -= static_cast<float>(n) * p_.frequency_penalty + p_.presence_penalty;
  }
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) fail(ErrorKind::Input, "sampler: empty logits row");
  std::vector<Candidate> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]))
      fail(ErrorKind::Runtime, "sampler: logit " + std::to_string(i) + " is NaN");
    c[i] = {static_cast<int32_t>(i), logits[i]};
  }
  apply_penalties(c);
  const auto order = [](const Candidate& a, const Candidate& b) {
    return before(a.logit, a.id, b.logit, b.id);
  };

  if (p_.temperature <= 0.0f) return std::min_element(c.begin(), c.end(), order)->id;

  // Top-k: keep the k best, sorted.
  size_t n = c.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    n = static_cast<size_t>(p_.top_k);
    std::partial_sort(c.begin(), c.begin() + n, c.end(), order);
    c.resize(n);
  } else {
    std::sort(c.begin(), c.end(), order);
  }

  // Probabilities of what is left, untempered, for top-p and min-p.
  const float max_logit = c[0].logit;
  if (std::isinf(max_logit) && max_logit < 0)
    fail(ErrorKind::Runtime, "sampler: every logit is -inf");
  std::vector<double> prob(n);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i)
    sum += prob[i] = std::exp(static_cast<double>(c[i].logit - max_logit));
  if (p_.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += prob[i] / sum;
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (p_.min_p > 0.0f) {
    // prob[0] is the best token's (exp(0) = 1); keep those within min_p of it.
    size_t keep = 1;
    while (keep < n && prob[keep] >= p_.min_p) ++keep;
    n = keep;
  }

  // Temperature, then one draw.
  std::vector<double> w(n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i)
    total += w[i] = std::exp(static_cast<double>(c[i].logit - max_logit) / p_.temperature);
  const double u = rng_.uniform() * total;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += w[i];
    if (u < cum) return c[i].id;
  }
  return c[n - 1].id;  // u landed on the rounding gap at the very end
}

}  // namespace ts
