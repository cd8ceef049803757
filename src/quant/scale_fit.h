// The scale searches of llama.cpp's quantisers (ggml-quants.c's make_qx_quants, make_q3_quants,
// make_qkx2/3_quants, make_qp_quants and the iq4 search): each fits one group of values to integer
// levels times a scale (and, for the affine fit, minus a min), minimising a weighted squared
// error over a few trial scales. Used by quantize_search.cpp.
#pragma once

#include <cstdint>

namespace ts {

// A group whose largest magnitude is below this is all zeros (ggml's GROUP_MAX_EPS).
inline constexpr float kGroupEps = 1e-15f;

// Round to nearest, ties to even (ggml's nearest_int).
int nearest_int(float v);

// Signed levels l in [-nmax, nmax - 1], x ~ scale * l, the largest magnitude mapped to -nmax:
// the best of 19 trial inverse scales -(nmax + k / 10) / max (|k| <= 9) by weighted least squares,
// weights w (null: x^2). Writes L[i] = l + nmax; returns the scale (0 for an all-zero group).
float fit_signed(int n, int nmax, const float* x, const float* w, uint8_t* L);

// As fit_signed's first trial, then up to five rounds moving single levels while the x^2-weighted
// fit improves (q3_k without importance). Writes L[i] = l + nmax; returns the scale.
float fit_signed_refined(int n, int nmax, const float* x, uint8_t* L);

// Search steps of fit_affine: trial inverse scales (nmax + rmin + rdelta * k) / (max - min) for
// k in [0, nstep]; the error is absolute (mad) or squared.
struct AffineSearch {
  float rmin;
  float rdelta;
  int nstep;
  bool mad;
};

// Levels l in [0, nmax], x ~ scale * l - neg_min with neg_min >= 0: each trial's levels refit by
// weighted least squares for scale and min, the lowest weighted error kept. Writes L; returns the
// scale and sets neg_min.
float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float& neg_min,
                 const AffineSearch& s);

// Non-negative values (sub-block scales or mins) to codes in [0, nmax] times one scale: nine trial
// inverse scales, then up to five rounds moving single codes, by w-weighted least squares. Writes
// L; returns the scale.
float fit_positive(int n, int nmax, const float* x, const float* w, uint8_t* L);

// fit_positive's scale for magnitudes of which a few are negated (iq2_xxs's even-sign flips):
// those take negative codes rather than 0, so that they pull the scale as llama.cpp's do.
float fit_magnitude_scale(int n, int nmax, const float* x, const float* w);

// Index of the iq4 level (kIq4Levels) nearest to v, the upper of two equally near.
int nearest_iq4_level(float v);

// The scale of a 32-element iq4 group: the best of 16 trial scales around max / -127 by weighted
// least squares of x against its nearest levels (0 for an all-zero group).
float fit_iq4(const float* x, const float* w);

}  // namespace ts
