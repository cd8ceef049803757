#include "quant/grid_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/scale_fit.h"

namespace ts {
namespace {

// Rounds one group to levels at inverse scale `inv`, then to the grid. Returns whether the
// rounded group was an entry itself.
bool round_group(const GridCodebook& cb, const float* xval, const float* wroot, float inv,
                 int8_t* l) {
  const int top = cb.levels() - 1;
  for (int j = 0; j < cb.group(); ++j)
    l[j] = static_cast<int8_t>(std::clamp(nearest_int(0.5f * (inv * xval[j] - 1)), 0, top));
  const uint32_t key = cb.key(l);
  if (cb.entry(key) >= 0) return true;
  // Off the grid: the neighbour of least error at this scale, weighted by sqrt(w) (llama.cpp's
  // choice: the rounding already favours the heavy elements).
  float value[8];
  const float scale = 1 / inv;
  for (int v = 0; v <= top; ++v) value[v] = scale * static_cast<float>(2 * v + 1);
  const int e = cb.nearest(key, xval, wroot, value);
  for (int j = 0; j < cb.group(); ++j) l[j] = static_cast<int8_t>(cb.level(e, j));
  return false;
}

// sum w x q and sum w q^2 with q = 2 l + 1.
void moments(int n, const float* xval, const float* w, const int8_t* l, float& sumqx,
             float& sumq2) {
  sumqx = sumq2 = 0;
  for (int i = 0; i < n; ++i) {
    const float q = static_cast<float>(2 * l[i] + 1);
    sumqx += w[i] * xval[i] * q;
    sumq2 += w[i] * q * q;
  }
}

// Magnitudes and sign bits of each 8 elements. With even signs a group of odd negatives flips
// its least important element (least w x^2) to the positive side: it then fits -|x| with a
// non-negative level, the cheapest error that makes the count even.
void split_signs(int n, bool even, const float* x, const float* w, float* xval, uint8_t* signs) {
  for (int k = 0; k < n / 8; ++k) {
    uint8_t s = 0;
    int negatives = 0;
    for (int i = 0; i < 8; ++i) {
      const float v = x[8 * k + i];
      xval[8 * k + i] = std::fabs(v);
      if (v < 0) {
        s |= static_cast<uint8_t>(1 << i);
        ++negatives;
      }
    }
    if (even && negatives % 2 != 0) {
      int imin = 0;
      for (int i = 1; i < 8; ++i)
        if (w[8 * k + i] * x[8 * k + i] * x[8 * k + i] <
            w[8 * k + imin] * x[8 * k + imin] * x[8 * k + imin])
          imin = i;
      xval[8 * k + imin] = -xval[8 * k + imin];
      s ^= static_cast<uint8_t>(1 << imin);
    }
    signs[k] = even ? static_cast<uint8_t>(s & 127) : s;
  }
}

}  // namespace

SubBlockFit fit_grid_subblock(const GridSearch& s, const GridCodebook& cb, const float* x,
                              const float* w) {
  const int n = s.sub_len, g = cb.group(), groups = n / g;
  const int kmax = cb.levels();  // llama.cpp's kMaxQ
  SubBlockFit fit;
  float xval[32], wroot[32];
  for (int i = 0; i < n; ++i) wroot[i] = std::sqrt(w[i]);
  split_signs(n, s.even_signs, x, w, xval, fit.signs);
  int8_t best_l[32] = {}, l[32];
  const float max = *std::max_element(xval, xval + n);
  const auto zero = [&] {
    std::memset(fit.signs, 0, sizeof(fit.signs));
    for (int q = 0; q < groups; ++q) fit.entry[q] = static_cast<uint16_t>(cb.entry(cb.key(best_l)));
    return fit;
  };
  if (max == 0 || max < s.zero_below) return zero();
  float scale = max / static_cast<float>(2 * kmax - 1), span = max;
  if (s.qp_start) {
    scale = fit_magnitude_scale(n, kmax + 1, xval, w);
    span = scale * static_cast<float>(kmax);
    if (span <= 0) return zero();
  }
  bool on_grid[8], trial_on_grid[8];
  std::fill(on_grid, on_grid + groups, true);
  float best = 0;
  bool fitted = false;  // a trial had sum w q^2 > 0 (not so where every weight is 0)
  for (int k = -s.trials; k <= s.trials; ++k) {
    const float inv =
        (static_cast<float>(2 * kmax - 1) + static_cast<float>(k) * s.trial_step) / span;
    for (int q = 0; q < groups; ++q)
      trial_on_grid[q] = round_group(cb, xval + g * q, wroot + g * q, inv, l + g * q);
    float sumqx, sumq2;
    moments(n, xval, w, l, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(best_l, l, static_cast<size_t>(n));
      std::copy(trial_on_grid, trial_on_grid + groups, on_grid);
      fitted = true;
    }
  }
  // The groups rounded once more against the chosen scale (all of them where no trial fitted:
  // the levels are still zeros, rounding them at the starting scale keeps the values).
  const bool any_off = std::find(on_grid, on_grid + groups, false) != on_grid + groups;
  if ((s.refine_always || any_off || !fitted) && scale > 0) {
    for (int q = 0; q < groups; ++q)
      if (s.refine_all || !on_grid[q] || !fitted)
        round_group(cb, xval + g * q, wroot + g * q, 1 / scale, best_l + g * q);
    float sumqx, sumq2;
    moments(n, xval, w, best_l, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  if (scale < 0) {
    // Only a sub-block of mostly flipped elements; inverting every sign (the implied eighth
    // included: seven inverted bits change the parity) keeps the values.
    scale = -scale;
    for (int k = 0; k < n / 8; ++k)
      fit.signs[k] = static_cast<uint8_t>(s.even_signs ? ~fit.signs[k] & 127 : ~fit.signs[k]);
  }
  for (int q = 0; q < groups; ++q)
    fit.entry[q] = static_cast<uint16_t>(cb.entry(cb.key(best_l + g * q)));
  fit.scale = scale;
  return fit;
}

}  // namespace ts
