#include "runtime/rope_freqs.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ts {

namespace {

// YaRN, as transformers computes it: frequency i is kept (extrapolated) below the band
// [low, high) of pair indices, divided by the factor (interpolated) above it, and blended
// linearly across it. The band's ends are the pair indices that turn beta_fast and beta_slow
// times over the original context, rounded outwards unless `truncate` is off.
void yarn_inv_freq(const ArchConfig& c, float base, std::vector<float>& inv) {
  const double dim = static_cast<double>(c.rotary_dim);
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(static_cast<double>(c.rope_orig_ctx) / (rotations * 2.0 * M_PI)) /
           (2.0 * std::log(static_cast<double>(base)));
  };
  double low = correction_dim(c.rope_beta_fast), high = correction_dim(c.rope_beta_slow);
  if (c.rope_yarn_truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // no empty band
  for (size_t i = 0; i < inv.size(); ++i) {
    // In f32 from here, as transformers' tensors are.
    const float pos_freq =
        std::pow(base, static_cast<float>(2 * i) / static_cast<float>(c.rotary_dim));
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f,
        1.0f);
    const float extrapolation = 1.0f - ramp;
    const float interpolated = 1.0f / (c.rope_factor * pos_freq);
    inv[i] = interpolated * (1.0f - extrapolation) + inv[i] * extrapolation;
  }
}

}  // namespace

std::vector<float> rope_inv_freq(const ArchConfig& c, bool sliding,
                                 const std::vector<float>& divisors) {
  const int64_t half = c.rotary_dim / 2;
  if (c.rope_local_scaled) sliding = false;  // one rotary for every layer
  const float base = sliding ? c.rope_theta_local : c.rope_theta;
  std::vector<float> inv(static_cast<size_t>(half));
  // As transformers computes it, in f32: 1 / base^(2i / dim).
  for (int64_t i = 0; i < half; ++i)
    inv[static_cast<size_t>(i)] =
        1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(c.rotary_dim));
  if (sliding) return inv;
  if (!divisors.empty()) {
    if (static_cast<int64_t>(divisors.size()) != half)
      fail(ErrorKind::Model, "rope_freqs has " + std::to_string(divisors.size()) +
                                 " entries, expected " + std::to_string(half));
    for (int64_t i = 0; i < half; ++i)
      inv[static_cast<size_t>(i)] /= divisors[static_cast<size_t>(i)];
    return inv;
  }
  if (c.rope_scaling == RopeScaling::Linear) {
    for (float& f : inv) f /= c.rope_factor;
  } else if (c.rope_scaling == RopeScaling::Yarn) {
    yarn_inv_freq(c, base, inv);
  } else if (c.rope_scaling == RopeScaling::Llama3) {
    // Long wavelengths are slowed by `factor`, short ones kept, the band between interpolated.
    const float old_ctx = static_cast<float>(c.rope_orig_ctx);
    const float low_wavelen = old_ctx / c.rope_low_freq_factor;
    const float high_wavelen = old_ctx / c.rope_high_freq_factor;
    for (float& f : inv) {
      const float wavelen = 2.0f * static_cast<float>(M_PI) / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= c.rope_factor;
        continue;
      }
      const float smooth = (old_ctx / wavelen - c.rope_low_freq_factor) /
                           (c.rope_high_freq_factor - c.rope_low_freq_factor);
      f = (1.0f - smooth) * f / c.rope_factor + smooth * f;
    }
  }
  return inv;
}

std::vector<uint8_t> mrope_pair_streams(const ArchConfig& c) {
  if (!c.mrope()) return {};
  const auto& sec = c.mrope_sections;
  std::vector<uint8_t> streams(static_cast<size_t>(c.rotary_dim / 2), 0);
  for (size_t i = 0; i < streams.size(); ++i) {
    const auto n = static_cast<int64_t>(i);
    if (c.mrope_interleaved) {
      // transformers' apply_interleaved_mrope: H takes pairs 1, 4, 7, ... below 3 * sec[1], W
      // pairs 2, 5, 8, ... below 3 * sec[2]; every other pair keeps T.
      const int64_t s = n % 3;
      if (s != 0 && n < 3 * sec[static_cast<size_t>(s)]) streams[i] = static_cast<uint8_t>(s);
    } else if (n >= sec[0]) {
      streams[i] = n < sec[0] + sec[1] ? 1 : n < sec[0] + sec[1] + sec[2] ? 2 : 0;
    }
  }
  return streams;
}

std::vector<float> rope_inv_freq_layer(const ArchConfig& c, int64_t l,
                                       const std::vector<float>& divisors) {
  const int64_t hd = c.head_dim_of(l), half = hd / 2;
  const bool sliding = c.layer_sliding[static_cast<size_t>(l)] != 0;
  const float base = sliding ? c.rope_theta_local : c.rope_theta;
  // transformers: int(partial_rotary_factor * head_dim // 2) pairs rotate.
  const auto rotated = sliding ? half
                               : static_cast<int64_t>(static_cast<double>(c.rope_partial_global) *
                                                      static_cast<double>(hd) / 2.0);
  std::vector<float> inv(static_cast<size_t>(half), 0.0f);
  for (int64_t i = 0; i < rotated; ++i)
    inv[static_cast<size_t>(i)] =
        1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(hd));
  if (sliding || divisors.empty()) return inv;
  if (static_cast<int64_t>(divisors.size()) != half)
    fail(ErrorKind::Model, "rope_freqs has " + std::to_string(divisors.size()) +
                               " entries, expected " + std::to_string(half));
  for (int64_t i = 0; i < half; ++i)
    inv[static_cast<size_t>(i)] /= divisors[static_cast<size_t>(i)];
  return inv;
}

}  // namespace ts
