// The k-quant GEMM's packed super-blocks and micro-kernel (AVX512-VNNI), shared by the kernel
// that decodes panels from the row layout per matmul (matmul_kgemm_avx512vnni.cpp) and the ones
// over q4_k, q5_k and q6_k weights packed at load (matmul_q4k_q5k_panels_avx512vnni.cpp,
// matmul_q6k_panels_avx512vnni.cpp). Include it only there,
// inside the file's VNNI target pragma, after gemm_vnni_body.h; like that header it lives in an
// anonymous namespace.
//
// A chunk of a panel's super-blocks is laid out for the kernel in L1 (KPacked): the codes as
// unsigned bytes in the vpdpbusd layout of the 32-element GEMM (16 rows a vector, four codes a
// row), and beside them each row's sub-block scales as int32, its mins as int16 pairs, and d and
// dmin as floats. The kernel dots a sub-block's codes with the int8 activations (vpdpbusd, one
// instruction per 64 products, where the row kernels spend two: vpmaddubsw + vpdpwssd), applies
// the sub-block scale with one int32 multiply per sixteen rows, and rescales the super-block's
// exact int32 sum to float once. The sums are those of the row kernels (KKernel in
// matmul_x86_body.h); their float rounding differs (lanes here are weight rows, there parts of
// one row), so a prompt's rows agree with decode's to rounding, not bit for bit.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backend/cpu/gemm_vnni_body.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"

namespace ts::cpu {
namespace {

// Elements that share one scale: q4_k and q5_k scale 32-element sub-blocks (KDecoded repeats each
// scale for both 16-element halves), the others 16.
template <class Dec>
constexpr int sub_elems() {
  return std::is_same_v<Dec, DecQ4_K> || std::is_same_v<Dec, DecQ5_K> ? 32 : 16;
}

// One packed super-block of a panel:
//   codes[g][v][j][i] (g < 64, v < 2, j < 16, i < 4; 8 KiB): code 4g + i of row 16v + j;
//   scale[s][row] int32, s < kQKK / sub_elems: the sub-block's integer scale;
//   min[p][row] int32 = (min of 16-element sub-block 2p, of 2p + 1) as int16 (types with mins);
//   d[row], dmin[row] floats.
template <class Dec>
struct KPacked {
  static constexpr int kSubs = kQKK / sub_elems<Dec>();
  static constexpr int kMinPairs = Dec::kMin ? kQKK / 32 : 0;
  static constexpr size_t kCodes = 0;
  static constexpr size_t kScales = kCodes + kQKK * kPanelRows;
  static constexpr size_t kMins = kScales + kSubs * kPanelRows * sizeof(int32_t);
  static constexpr size_t kD = kMins + kMinPairs * kPanelRows * sizeof(int32_t);
  static constexpr size_t kDmin = kD + kPanelRows * sizeof(float);
  static constexpr size_t kBytes = kDmin + kPanelRows * sizeof(float);
};

// Super-blocks per chunk: two packed ones (21 KB) stay in L1 beside the activation tile.
constexpr int64_t kChunkSupers = 2;

// Where each sub-block's int32 sum starts, for the types whose codes carry an offset (q3_k: 4,
// q6_k: 32, iq4_xs: 128, its signed values packed as value + 128): -offset x the activations' sum
// over the sub-block, as a table [M][super-blocks][16].
template <class Dec>
void kblock_starts(const PackedActs& x, std::vector<int32_t>& starts) {
  if constexpr (Dec::kOffsetShift >= 0) {
    static_assert(sub_elems<Dec>() == 16);
    const int64_t nb = x.K / kQKK;
    starts.resize(static_cast<size_t>(x.M * nb * 16));
    for (int64_t m = 0; m < x.M; ++m) {
      const auto* xb = reinterpret_cast<const BlockQ8K*>(x.data.data() + m * x.row_bytes);
      for (int64_t b = 0; b < nb; ++b)
        for (int s = 0; s < 16; ++s)
          starts[static_cast<size_t>((m * nb + b) * 16 + s)] =
              -xb[b].bsums[s] * (1 << Dec::kOffsetShift);
    }
  }
}

// y rows m0..m0+T-1, columns [r, r + kPanelRows) (masked) += the packed super-blocks [b0, b1)
// at `chunk` dotted with the activations; `first` starts from zero.
template <class Dec, int T>
void kmicro(const uint8_t* chunk, const PackedActs& x, const int32_t* starts, int64_t m0,
            int64_t b0, int64_t b1, float* y, int64_t ldy, int64_t r,
            const __mmask16 mask[kPanelVecs], bool first) {
  using P = KPacked<Dec>;
  constexpr int kGroups = sub_elems<Dec>() / 4;
  const int64_t nb = x.K / kQKK;
  const BlockQ8K* xs[T];
  for (int t = 0; t < T; ++t)
    xs[t] = reinterpret_cast<const BlockQ8K*>(x.data.data() + (m0 + t) * x.row_bytes);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* pb = chunk + (b - b0) * P::kBytes;
    const auto* scale = reinterpret_cast<const int32_t*>(pb + P::kScales);
    __m512i itot[kPanelVecs][T];
    for (int s = 0; s < P::kSubs; ++s) {
      __m512i isum[kPanelVecs][T];
      for (int t = 0; t < T; ++t) {
        __m512i start = _mm512_setzero_si512();
        if constexpr (Dec::kOffsetShift >= 0)
          start = _mm512_set1_epi32(starts[((m0 + t) * nb + b) * 16 + s]);
        for (int v = 0; v < kPanelVecs; ++v) isum[v][t] = start;
      }
      // Unrolled: as a loop, GCC rotated the accumulators through register moves.
#pragma GCC unroll 8
      for (int gs = 0; gs < kGroups; ++gs) {
        const int g = s * kGroups + gs;
        __m512i wv[kPanelVecs];
        for (int v = 0; v < kPanelVecs; ++v)
          wv[v] = _mm512_loadu_si512(pb + P::kCodes + (g * kPanelVecs + v) * 64);
        for (int t = 0; t < T; ++t) {
          const __m512i xv = _mm512_set1_epi32(
              static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(xs[t][b].qs) + 4 * g)));
          for (int v = 0; v < kPanelVecs; ++v)
            isum[v][t] = _mm512_dpbusd_epi32(isum[v][t], wv[v], xv);
        }
      }
      for (int v = 0; v < kPanelVecs; ++v) {
        const __m512i sv = _mm512_loadu_si512(scale + s * kPanelRows + v * kVecRows);
        for (int t = 0; t < T; ++t) {
          const __m512i scaled = _mm512_mullo_epi32(isum[v][t], sv);
          itot[v][t] = s == 0 ? scaled : _mm512_add_epi32(itot[v][t], scaled);
        }
      }
    }
    // The min term: sum over sub-blocks of min x the activations' sum (int16 pairs).
    __m512i mtot[kPanelVecs][T];
    if constexpr (Dec::kMin) {
      const auto* mins = reinterpret_cast<const int32_t*>(pb + P::kMins);
      for (int v = 0; v < kPanelVecs; ++v)
        for (int t = 0; t < T; ++t) mtot[v][t] = _mm512_setzero_si512();
      for (int p = 0; p < P::kMinPairs; ++p) {
        __m512i mv[kPanelVecs];
        for (int v = 0; v < kPanelVecs; ++v)
          mv[v] = _mm512_loadu_si512(mins + p * kPanelRows + v * kVecRows);
        for (int t = 0; t < T; ++t) {
          const __m512i xv = _mm512_set1_epi32(
              static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(xs[t][b].bsums + 2 * p))));
          for (int v = 0; v < kPanelVecs; ++v)
            mtot[v][t] = _mm512_dpwssd_epi32(mtot[v][t], mv[v], xv);
        }
      }
    }
    const bool zero = first && b == b0;
    for (int v = 0; v < kPanelVecs; ++v) {
      const __m512 dv = _mm512_loadu_ps(reinterpret_cast<const float*>(pb + P::kD) + v * kVecRows);
      const __m512 mv =
          _mm512_loadu_ps(reinterpret_cast<const float*>(pb + P::kDmin) + v * kVecRows);
      for (int t = 0; t < T; ++t) {
        float* out = y + (m0 + t) * ldy + r + v * kVecRows;
        const __m512 xd = _mm512_set1_ps(xs[t][b].d);
        __m512 acc = zero ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[v], out);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(itot[v][t]), _mm512_mul_ps(dv, xd), acc);
        if constexpr (Dec::kMin)
          acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mtot[v][t]), _mm512_mul_ps(mv, xd), acc);
        _mm512_mask_storeu_ps(out, mask[v], acc);
      }
    }
  }
}

// Groups 8c .. 8c + 7 of sixteen decoded rows (chunk c of each KDecoded) in the vpdpbusd layout:
// words[g] lane j = the four codes of group 8c + g of row j.
inline void chunk_groups(const KDecoded (&k)[kVecRows], int c, __m512i (&words)[8]) {
  __m512i pairs[8];
  for (int j = 0; j < 8; ++j)
    pairs[j] = _mm512_inserti64x4(_mm512_castsi256_si512(k[j].u[c]), k[j + 8].u[c], 1);
  transpose16x8(pairs, words);
}

// The packed layouts' nibble plane from chunk c's groups (chunk_groups) of rows 16v .. 16v + 15:
// groups 2q and 2q + 1 in the low and high nibbles of vector (q, v), q = 4c .. 4c + 3 (the 16-bit
// shift of masked nibbles stays within their bytes).
inline void store_nibble_pairs(const __m512i (&words)[8], int c, int v, uint8_t* out) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int h = 0; h < 4; ++h) {
    const __m512i both =
        _mm512_or_si512(_mm512_and_si512(words[2 * h], low4),
                        _mm512_slli_epi16(_mm512_and_si512(words[2 * h + 1], low4), 4));
    _mm512_storeu_si512(out + ((4 * c + h) * kPanelVecs + v) * 64, both);
  }
}

// The GEMM over rows [r0, r1): for each panel and chunk of kChunkSupers super-blocks,
// source.pack(r, valid, b0, b1, dst) lays the chunk out as KPacked<Dec> and
// source.prefetch(next, i, tiles) fetches part i of the next chunk before activation tile i.
template <class Dec, class Source>
void kgemm(const Source& source, const PackedActs& x, int64_t r0, int64_t r1, float* y,
           int64_t ldy) {
  // One buffer per thread, sized once and kept.
  thread_local std::vector<uint8_t> panel;
  panel.resize(kChunkSupers * KPacked<Dec>::kBytes);
  thread_local std::vector<int32_t> starts;
  kblock_starts<Dec>(x, starts);
  panel_gemm(
      r0, r1, x.K / kQKK, x.M, kChunkSupers,
      [&](int64_t r, int64_t valid, int64_t b0, int64_t b1) {
        source.pack(r, valid, b0, b1, panel.data());
        return static_cast<const uint8_t*>(panel.data());
      },
      [&](const NextChunk& next, int64_t i, int64_t tiles) { source.prefetch(next, i, tiles); },
      [&]<int T>(const uint8_t* chunk, int64_t m0, int64_t b0, int64_t b1, int64_t r,
                 const __mmask16* mask, bool first) {
        kmicro<Dec, T>(chunk, x, starts.data(), m0, b0, b1, y, ldy, r, mask, first);
      });
}

}  // namespace
}  // namespace ts::cpu
