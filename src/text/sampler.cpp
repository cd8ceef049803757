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
  for (const auto& [id, bias] : p_.logit_bias) {
    if (id < 0) bad("logit bias token id must be >= 0, got " + std::to_string(id));
    if (std::isnan(bias) || bias > kBanBias)
      bad("logit bias must be at most " + std::to_string(static_cast<int>(kBanBias)) +
          " (-inf or <= -" + std::to_string(static_cast<int>(kBanBias)) + " bans), got " +
          std::to_string(bias));
  }
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

void Sampler::apply_logit_bias(std::vector<Candidate>& c) const {
  for (const auto& [id, bias] : p_.logit_bias) {
    if (id >= static_cast<int32_t>(c.size()))
      fail(ErrorKind::Input, "logit bias: token id " + std::to_string(id) +
                                 " is outside the vocabulary of " + std::to_string(c.size()));
    float& l = c[static_cast<size_t>(id)].logit;
    l = bias <= -kBanBias ? -INFINITY : l + bias;
  }
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
  apply_logit_bias(c);
  apply_penalties(c);
  const auto order = [](const Candidate& a, const Candidate& b) {
    return before(a.logit, a.id, b.logit, b.id);
  };

  if (p_.temperature <= 0.0f) {
    const Candidate& best = *std::min_element(c.begin(), c.end(), order);
    if (std::isinf(best.logit) && best.logit < 0)
      fail(ErrorKind::Input, "sampler: every token is banned (-inf)");
    return best.id;
  }

  // Top-k: keep the k best, sorted. Otherwise candidates stay in id order unless top-p needs
  // the best ones first (a full sort of a 262k-entry vocabulary on every token is what this
  // avoids).
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < c.size()) {
    std::partial_sort(c.begin(), c.begin() + p_.top_k, c.end(), order);
    c.resize(static_cast<size_t>(p_.top_k));
  }
  const float max_logit =
      std::max_element(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
        return a.logit < b.logit;
      })->logit;
  if (std::isinf(max_logit) && max_logit < 0)
    fail(ErrorKind::Input, "sampler: every token is banned (-inf)");
  // Untempered probabilities relative to the best token (exp(0) = 1 for it), for top-p / min-p.
  const auto rel = [&](const Candidate& x) {
    return std::exp(static_cast<double>(x.logit - max_logit));
  };

  if (p_.top_p < 1.0f) {
    double sum = 0.0;
    for (const Candidate& x : c) sum += rel(x);
    const double target = p_.top_p * sum;
    size_t sorted = c.size();
    if (p_.top_k <= 0) {
      // Only the tokens that top-p can keep need sorting. A histogram of the mass by distance
      // below the best logit finds the bucket where top_p of the mass is reached; the tokens
      // up to and including that bucket are moved to the front and sorted.
      constexpr size_t kBuckets = 1024;
      constexpr double kWidth = 0.04;  // logit units per bucket: 41 units below the best
      const auto bucket = [&](const Candidate& x) {
        const double d = static_cast<double>(max_logit) - x.logit;
        return d < kBuckets * kWidth ? static_cast<size_t>(d / kWidth) : kBuckets;
      };
      std::vector<double> mass(kBuckets + 1, 0.0);
      for (const Candidate& x : c) mass[bucket(x)] += rel(x);
      size_t boundary = 0;
      for (double cum = mass[0]; cum < target && boundary < kBuckets;) cum += mass[++boundary];
      const auto mid = std::partition(c.begin(), c.end(),
                                      [&](const Candidate& x) { return bucket(x) <= boundary; });
      std::sort(c.begin(), mid, order);
      sorted = static_cast<size_t>(mid - c.begin());
    }
    double cum = 0.0;
    size_t keep = 0;
    while (keep < sorted && cum < target) cum += rel(c[keep++]);
    c.resize(std::max<size_t>(keep, 1));
  }
  if (p_.min_p > 0.0f) {
    c.erase(
        std::remove_if(c.begin(), c.end(), [&](const Candidate& x) { return rel(x) < p_.min_p; }),
        c.end());
  }

  // Temperature, then one draw over the candidates in their (deterministic) order.
  std::vector<double> w(c.size());
  double total = 0.0;
  for (size_t i = 0; i < c.size(); ++i)
    total += w[i] = std::exp(static_cast<double>(c[i].logit - max_logit) / p_.temperature);
  const double u = rng_.uniform() * total;
  double cum = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += w[i];
    if (u < cum) return c[i].id;
  }
  return c.back().id;  // u landed on the rounding gap at the very end
}

}  // namespace ts
