// The attention tile kernel (attention_tile.h), written once over a 16-lane vector type `V` and
// instantiated per instruction set. A file includes this inside its own target region (after
// the standard headers below, so that none of them is compiled for that target) and defines V
// with: F (the vector), zero, load, store, bcast (one float to every lane), fma
// (a * b + c), mul, add, max, exp_shifted (e^(s - ref), exactly 0 where s = -inf),
// finite_or_zero (0 where -inf), mask_keys (s where lo <= j < hi, -inf elsewhere) and hsum; and
// two whole steps it may do better than the generic code: load_row (a kv head's slice of a cache
// row as floats) and scores_few_queries (a tile's scores for a block of few query vectors; false
// where it leaves them to scores()).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/attention_tile.h"

namespace ts::cpu {
namespace {

// The K and V lines of the key this far ahead are requested while one is converted (a kv head's
// slice of consecutive rows is a row_bytes stride): faster on a long decode in alternated runs;
// nearer, farther, or into L2 measured the same (docs/PERFORMANCE.md, "Measured choices").
constexpr int64_t kPrefetchKeys = 16;

// Scores of keys [0, nk) of the tile for query vectors [16 v0, 16 (v0 + NV)): NV vectors of
// lanes x KG keys of accumulators, each query vector loaded once per KG keys and each key
// element broadcast to NV vectors.
template <class V, int NV, int KG>
void score_keys(const QueryBlock& b, const float* k, int64_t j, int64_t v0, float* s) {
  typename V::F acc[KG][NV];
  for (int g = 0; g < KG; ++g)
    for (int v = 0; v < NV; ++v) acc[g][v] = V::zero();
  const float* q = b.q + v0 * kLanes;
  for (int64_t d = 0; d < b.hd; ++d) {
    typename V::F qv[NV];
    for (int v = 0; v < NV; ++v) qv[v] = V::load(q + d * b.Rp + v * kLanes);
    for (int g = 0; g < KG; ++g) {
      const typename V::F kb = V::bcast(k + (j + g) * b.hdp + d);
      for (int v = 0; v < NV; ++v) acc[g][v] = V::fma(kb, qv[v], acc[g][v]);
    }
  }
  for (int g = 0; g < KG; ++g)
    for (int v = 0; v < NV; ++v) V::store(s + (j + g) * b.Rp + (v0 + v) * kLanes, acc[g][v]);
}

template <class V, int NV>
void score_vectors(const QueryBlock& b, const float* k, int64_t nk, int64_t v0, float* s) {
  // Fewer vectors of lanes leave registers for more keys per pass.
  constexpr int KG = NV == 1 ? 8 : NV == 2 ? 6 : 4;
  int64_t j = 0;
  for (; j + KG <= nk; j += KG) score_keys<V, NV, KG>(b, k, j, v0, s);
  for (; j < nk; ++j) score_keys<V, NV, 1>(b, k, j, v0, s);
}

// s[j * Rp + r] = q_r . k_j for the tile's nk keys.
template <class V>
void scores(const QueryBlock& b, const float* k, int64_t nk, float* s) {
  if (b.R < kMinLaneQueries) {
    for (int64_t j = 0; j < nk; ++j) {
      for (int64_t r = 0; r < b.R; ++r) {
        typename V::F acc = V::zero();
        for (int64_t d = 0; d < b.hdp; d += kLanes)
          acc = V::fma(V::load(b.q + r * b.hdp + d), V::load(k + j * b.hdp + d), acc);
        s[j * b.Rp + r] = V::hsum(acc);
      }
      for (int64_t r = b.R; r < b.Rp; ++r) s[j * b.Rp + r] = 0;
    }
    return;
  }
  const int64_t nvec = b.Rp / kLanes;
  for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
    switch (std::min<int64_t>(4, nvec - v0)) {
      case 1:
        score_vectors<V, 1>(b, k, nk, v0, s);
        break;
      case 2:
        score_vectors<V, 2>(b, k, nk, v0, s);
        break;
      case 3:
        score_vectors<V, 3>(b, k, nk, v0, s);
        break;
      default:
        score_vectors<V, 4>(b, k, nk, v0, s);
        break;
    }
  }
}

// o[r][d] = o[r][d] * alpha[r] + sum_j p[j][r] v[j][d] for RB query vectors from r0 and DV
// vectors of head_dim from d0: each v vector loaded once feeds RB query vectors.
template <class V, int RB, int DV>
void pv_block(const QueryBlock& b, const float* vt, const float* p, const float* alpha, int64_t nk,
              int64_t r0, int64_t d0, float* o) {
  typename V::F acc[RB][DV];
  for (int i = 0; i < RB; ++i) {
    const typename V::F a = V::bcast(alpha + r0 + i);
    for (int v = 0; v < DV; ++v)
      acc[i][v] = V::mul(V::load(o + (r0 + i) * b.hdp + d0 + v * kLanes), a);
  }
  for (int64_t j = 0; j < nk; ++j) {
    typename V::F vv[DV];
    for (int v = 0; v < DV; ++v) vv[v] = V::load(vt + j * b.hdp + d0 + v * kLanes);
    for (int i = 0; i < RB; ++i) {
      const typename V::F pb = V::bcast(p + j * b.Rp + r0 + i);
      for (int v = 0; v < DV; ++v) acc[i][v] = V::fma(pb, vv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < RB; ++i)
    for (int v = 0; v < DV; ++v) V::store(o + (r0 + i) * b.hdp + d0 + v * kLanes, acc[i][v]);
}

template <class V, int RB>
void pv_rows(const QueryBlock& b, const float* vt, const float* p, const float* alpha, int64_t nk,
             int64_t r0, float* o) {
  for (int64_t d0 = 0; d0 < b.hdp; d0 += 4 * kLanes) {
    switch (std::min<int64_t>(4, (b.hdp - d0) / kLanes)) {
      case 1:
        pv_block<V, RB, 1>(b, vt, p, alpha, nk, r0, d0, o);
        break;
      case 2:
        pv_block<V, RB, 2>(b, vt, p, alpha, nk, r0, d0, o);
        break;
      case 3:
        pv_block<V, RB, 3>(b, vt, p, alpha, nk, r0, d0, o);
        break;
      default:
        pv_block<V, RB, 4>(b, vt, p, alpha, nk, r0, d0, o);
        break;
    }
  }
}

template <class V>
void pv(const QueryBlock& b, const float* vt, const float* p, const float* alpha, int64_t nk,
        float* o) {
  int64_t r = 0;
  for (; r + 4 <= b.R; r += 4) pv_rows<V, 4>(b, vt, p, alpha, nk, r, o);
  for (; r < b.R; ++r) pv_rows<V, 1>(b, vt, p, alpha, nk, r, o);
}

// The online softmax over one tile, lane-wise: masks the scores, raises each lane's max, turns
// the scores into e^(s - max) in place, rescales the sums and leaves the outputs' rescale in
// alpha. A lane that has seen no key yet keeps max -inf and uses 0 as its reference.
template <class V>
void softmax_tile(const QueryBlock& b, int64_t t0, int64_t nk, bool masked, const LaneState& st,
                  float* s, float* alpha) {
  for (int64_t r = 0; r < b.Rp; r += kLanes) {
    const typename V::F m_old = V::load(st.m + r);
    typename V::F mx = m_old;
    if (masked) {
      const typename V::F lo = V::load(b.lo + r), hi = V::load(b.hi + r);
      for (int64_t j = 0; j < nk; ++j) {
        const typename V::F sj =
            V::mask_keys(V::load(s + j * b.Rp + r), static_cast<float>(t0 + j), lo, hi);
        V::store(s + j * b.Rp + r, sj);
        mx = V::max(mx, sj);
      }
    } else {
      for (int64_t j = 0; j < nk; ++j) mx = V::max(mx, V::load(s + j * b.Rp + r));
    }
    const typename V::F ref = V::finite_or_zero(mx);
    const typename V::F a = V::exp_shifted(m_old, ref);
    typename V::F l = V::mul(V::load(st.l + r), a);
    for (int64_t j = 0; j < nk; ++j) {
      const typename V::F p = V::exp_shifted(V::load(s + j * b.Rp + r), ref);
      V::store(s + j * b.Rp + r, p);
      l = V::add(l, p);
    }
    V::store(st.l + r, l);
    V::store(st.m + r, mx);
    V::store(alpha + r, a);
  }
}

template <class V>
void attend_keys(const QueryBlock& b, const KvHead& kv, int64_t j0, int64_t j1, float softcap,
                 const LaneState& st, const TileScratch& ws) {
  std::fill_n(st.m, b.Rp, -std::numeric_limits<float>::infinity());
  std::fill_n(st.l, b.Rp, 0.0f);
  std::fill_n(st.o, b.R * b.hdp, 0.0f);
  for (int64_t t0 = j0; t0 < j1;) {
    const int64_t t1 = std::min(j1, (t0 / kTileKeys + 1) * kTileKeys);
    const int64_t nk = t1 - t0;
    for (int64_t j = 0; j < nk; ++j) {
      const size_t off = static_cast<size_t>(t0 + j) * kv.row_bytes;
      if (t0 + j + kPrefetchKeys < j1) {
        const size_t ahead = off + kPrefetchKeys * kv.row_bytes;
        for (size_t c = 0; c < kv.head_bytes; c += 64) {
          __builtin_prefetch(kv.k + ahead + c);
          __builtin_prefetch(kv.v + ahead + c);
        }
      }
      V::load_row(kv.dtype, kv.k + off, ws.k + j * b.hdp, b.hd);
      V::load_row(kv.dtype, kv.v + off, ws.v + j * b.hdp, b.hd);
    }
    if (!V::scores_few_queries(b, ws, nk)) scores<V>(b, ws.k, nk, ws.s);
    if (softcap > 0)
      for (int64_t i = 0; i < nk * b.Rp; ++i) ws.s[i] = softcap * std::tanh(ws.s[i] / softcap);
    const bool masked = t0 < b.lo_max || t1 > b.hi_min || b.R < b.Rp;
    softmax_tile<V>(b, t0, nk, masked, st, ws.s, ws.alpha);
    pv<V>(b, ws.v, ws.s, ws.alpha, nk, st.o);
    t0 = t1;
  }
}

}  // namespace
}  // namespace ts::cpu
