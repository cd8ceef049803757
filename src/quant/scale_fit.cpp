#include "quant/scale_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"

namespace ts {
namespace {

// The element of largest magnitude, with its sign, and that magnitude.
float signed_max(const float* x, int n, float& amax) {
  float max = 0;
  amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

int signed_level(float iscale, float x, int nmax) {
  return std::clamp(nearest_int(iscale * x), -nmax, nmax - 1);
}

}  // namespace

int nearest_int(float v) {
  return static_cast<int>(std::nearbyint(v));
}

float fit_signed(int n, int nmax, const float* x, const float* w, uint8_t* L) {
  float amax = 0;
  const float max = signed_max(x, n, amax);
  if (amax < kGroupEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0;
  }
  const auto weight = [&](int i) { return w != nullptr ? w[i] : x[i] * x[i]; };
  // Sums of w x l and w l^2 over the levels of one inverse scale.
  const auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = signed_level(iscale, x[i], nmax);
      sumlx += weight(i) * x[i] * static_cast<float>(l);
      suml2 += weight(i) * static_cast<float>(l * l);
    }
  };
  const auto keep = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<uint8_t>(signed_level(iscale, x[i], nmax) + nmax);
  };
  float sumlx = 0, suml2 = 0;
  const float first = static_cast<float>(-nmax) / max;
  sums(first, sumlx, suml2);
  keep(first);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      keep(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float fit_signed_refined(int n, int nmax, const float* x, uint8_t* L) {
  float amax = 0;
  const float max = signed_max(x, n, amax);
  if (amax < kGroupEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  int level[kQK32];
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    level[i] = signed_level(iscale, x[i], nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(level[i]);
    suml2 += w * static_cast<float>(level[i] * level[i]);
  }
  for (int round = 0; round < 5; ++round) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(level[i]);
      if (slx <= 0) continue;
      float sl2 = suml2 - w * static_cast<float>(level[i] * level[i]);
      const int l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == level[i]) continue;
      slx += w * x[i] * static_cast<float>(l);
      sl2 += w * static_cast<float>(l * l);
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        level[i] = l;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(level[i] + nmax);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float& neg_min,
                 const AffineSearch& s) {
  float min = x[0], max = x[0];
  float sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  min = std::min(min, 0.0f);
  if (max <= min) {
    std::memset(L, 0, static_cast<size_t>(n));
    neg_min = -min;
    return 0;
  }
  const auto error = [&](float scale, float offset, const uint8_t* q) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * static_cast<float>(q[i]) + offset - x[i];
      e += w[i] * (s.mad ? std::fabs(diff) : diff * diff);
    }
    return e;
  };
  const auto levels = [&](float iscale, uint8_t* q) {
    for (int i = 0; i < n; ++i)
      q[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
  };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  levels(iscale, L);
  float best = error(scale, min, L);
  uint8_t trial[kQK32];
  for (int k = 0; k <= s.nstep; ++k) {
    iscale = (s.rmin + s.rdelta * static_cast<float>(k) + static_cast<float>(nmax)) / (max - min);
    levels(iscale, trial);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const float l = trial[i];
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float e = error(this_scale, this_min, trial);
    if (e < best) {
      std::memcpy(L, trial, static_cast<size_t>(n));
      best = e;
      scale = this_scale;
      min = this_min;
    }
  }
  neg_min = -min;
  return scale;
}

namespace {

// fit_positive with codes in [lowest, nmax].
float fit_codes(int n, int lowest, int nmax, const float* x, const float* w, int* L) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupEps) {
    std::fill(L, L + n, 0);
    return 0;
  }
  const auto code = [&](float iscale, float v) {
    return std::clamp(nearest_int(iscale * v), lowest, nmax);
  };
  const auto mse = [&](float iscale) {
    const float scale = 1 / iscale;
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = x[i] - scale * static_cast<float>(code(iscale, x[i]));
      e += w[i] * diff * diff;
    }
    return e;
  };
  float iscale = static_cast<float>(nmax) / max;
  float best = mse(iscale);
  for (int k = -4; k <= 4; ++k) {
    if (k == 0) continue;
    const float trial = (0.1f * static_cast<float>(k) + static_cast<float>(nmax)) / max;
    const float e = mse(trial);
    if (e < best) {
      best = e;
      iscale = trial;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = code(iscale, x[i]);
    L[i] = l;
    sumlx += w[i] * x[i] * static_cast<float>(l);
    suml2 += w[i] * static_cast<float>(l * l);
  }
  for (int round = 0; round < 5; ++round) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      float slx = sumlx - w[i] * x[i] * static_cast<float>(L[i]);
      float sl2 = suml2 - w[i] * static_cast<float>(L[i] * L[i]);
      if (slx <= 0 || sl2 <= 0) continue;
      const int l = std::clamp(nearest_int(x[i] * sl2 / slx), lowest, nmax);
      if (l == L[i]) continue;
      slx += w[i] * x[i] * static_cast<float>(l);
      sl2 += w[i] * static_cast<float>(l * l);
      if (slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = l;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

}  // namespace

float fit_positive(int n, int nmax, const float* x, const float* w, uint8_t* L) {
  int codes[kQKK];
  const float scale = fit_codes(n, 0, nmax, x, w, codes);
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(codes[i]);
  return scale;
}

float fit_magnitude_scale(int n, int nmax, const float* x, const float* w) {
  int codes[kQKK];
  return fit_codes(n, -nmax, nmax, x, w, codes);
}

// A bisection of the sorted levels: the quantisers call this for every element of every trial.
int nearest_iq4_level(float v) {
  if (v <= kIq4Levels[0]) return 0;
  if (v >= kIq4Levels[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < kIq4Levels[mid])
      hi = mid;
    else
      lo = mid;
  }
  return v - kIq4Levels[lo] < kIq4Levels[hi] - v ? lo : hi;
}

float fit_iq4(const float* x, const float* w) {
  float amax = 0;
  const float max = signed_max(x, kQK32, amax);
  if (amax < kGroupEps) return 0;
  // Sums of w x q and w q^2 over the levels nearest x * iscale.
  const auto sums = [&](float iscale, float& sumqx, float& sumq2) {
    sumqx = sumq2 = 0;
    for (int i = 0; i < kQK32; ++i) {
      const float q = kIq4Levels[nearest_iq4_level(iscale * x[i])];
      sumqx += w[i] * q * x[i];
      sumq2 += w[i] * q * q;
    }
  };
  constexpr int kTries = 7;
  const float low = kIq4Levels[0];
  float sumqx = 0, sumq2 = 0;
  sums(1 / (-max / low), sumqx, sumq2);
  float d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int k = -kTries; k <= kTries; ++k) {
    sums((static_cast<float>(k) + low) / max, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

}  // namespace ts
