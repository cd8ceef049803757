#include "backend/routing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace ts {
namespace {

// Indices of the k largest values; ties go to the lower index, so the choice is deterministic.
void top_k(const float* v, int64_t n, int64_t k, int32_t* out) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::copy_n(idx.begin(), k, out);
}

// Sigmoid scores biased for the choice, every expert outside the topk_group best groups (by the
// sum of their two best choice scores) excluded from it.
void group_limited_choice(const float* logits, const RouterArgs& a, float* p, float* choice) {
  const int64_t n = a.n_expert, size = n / a.n_group;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    choice[i] = p[i] + (a.bias ? a.bias[i] : 0.0f);
  }
  std::vector<float> group_score(static_cast<size_t>(a.n_group));
  for (int64_t g = 0; g < a.n_group; ++g) {
    const float* s = choice + g * size;
    float best = -INFINITY, second = -INFINITY;
    for (int64_t i = 0; i < size; ++i) {
      if (s[i] > best) {
        second = best;
        best = s[i];
      } else if (s[i] > second) {
        second = s[i];
      }
    }
    group_score[static_cast<size_t>(g)] = size > 1 ? best + second : best;
  }
  std::vector<int32_t> kept(static_cast<size_t>(a.topk_group));
  top_k(group_score.data(), a.n_group, a.topk_group, kept.data());
  std::vector<uint8_t> keep(static_cast<size_t>(a.n_group), 0);
  for (int32_t g : kept) keep[static_cast<size_t>(g)] = 1;
  for (int64_t i = 0; i < n; ++i)
    if (!keep[static_cast<size_t>(i / size)]) choice[i] = -INFINITY;
}

}  // namespace

void route_token(const float* logits, const RouterArgs& a, int32_t* experts, float* weights) {
  const int64_t n = a.n_expert, k = a.k;
  std::vector<float> p(static_cast<size_t>(n));
  switch (a.scoring) {
    case RouterScoring::TopkSoftmax: {
      top_k(logits, n, k, experts);
      float mx = logits[experts[0]];
      for (int64_t i = 1; i < k; ++i) mx = std::max(mx, logits[experts[i]]);
      float sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += weights[i] = std::exp(logits[experts[i]] - mx);
      for (int64_t i = 0; i < k; ++i) weights[i] /= sum;
      return;
    }
    case RouterScoring::SoftmaxTopk: {
      float mx = logits[0];
      for (int64_t i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
      float sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += p[static_cast<size_t>(i)] = std::exp(logits[i] - mx);
      for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] /= sum;
      top_k(p.data(), n, k, experts);
      for (int64_t i = 0; i < k; ++i) weights[i] = p[static_cast<size_t>(experts[i])];
      break;
    }
    case RouterScoring::SigmoidBiasTopk: {
      // The bias decides which experts run; the weights stay the unbiased sigmoids.
      std::vector<float> choice(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        p[static_cast<size_t>(i)] = 1.0f / (1.0f + std::exp(-logits[i]));
        choice[static_cast<size_t>(i)] = p[static_cast<size_t>(i)] + (a.bias ? a.bias[i] : 0.0f);
      }
      top_k(choice.data(), n, k, experts);
      for (int64_t i = 0; i < k; ++i) weights[i] = p[static_cast<size_t>(experts[i])];
      break;
    }
    case RouterScoring::SigmoidGroupTopk: {
      std::vector<float> choice(static_cast<size_t>(n));
      group_limited_choice(logits, a, p.data(), choice.data());
      top_k(choice.data(), n, k, experts);
      for (int64_t i = 0; i < k; ++i) weights[i] = p[static_cast<size_t>(experts[i])];
      break;
    }
    case RouterScoring::None:
      fail(ErrorKind::Runtime, "routing requested for a model without a router");
  }
  if (a.norm_topk) {
    float sum = 0;
    for (int64_t i = 0; i < k; ++i) sum += weights[i];
    for (int64_t i = 0; i < k; ++i) weights[i] /= sum;
  }
  if (a.scale != 1.0f)
    for (int64_t i = 0; i < k; ++i) weights[i] *= a.scale;
  if (a.expert_scale != nullptr)
    for (int64_t i = 0; i < k; ++i) weights[i] *= a.expert_scale[experts[i]];
}

const char* router_scoring_name(RouterScoring r) {
  switch (r) {
    case RouterScoring::None:
      return "none";
    case RouterScoring::TopkSoftmax:
      return "topk-softmax";
    case RouterScoring::SoftmaxTopk:
      return "softmax-topk";
    case RouterScoring::SigmoidBiasTopk:
      return "sigmoid-bias-topk";
    case RouterScoring::SigmoidGroupTopk:
      return "sigmoid-group-topk";
  }
  return "?";
}

}  // namespace ts
