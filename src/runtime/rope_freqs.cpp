#include "runtime/rope_freqs.h"

#include <cmath>

#include "core/error.h"

namespace ts {

std::vector<float> rope_inv_freq(const ArchConfig& c, bool sliding,
                                 const std::vector<float>& divisors) {
  const int64_t half = c.rotary_dim / 2;
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

}  // namespace ts
