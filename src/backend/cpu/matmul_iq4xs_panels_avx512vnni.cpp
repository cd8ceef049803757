// Kernels over iq4_xs weights in the panel layout (panel_layout.h) on AVX512-VNNI: the in-place
// packer run at load, the decode GEMV, and the prefill GEMM of kgemm_vnni_body.h fed from the
// packed panels. As for q4_k (matmul_q4k_q5k_panels_avx512vnni.cpp), sixteen rows are the lanes
// of a vector: one load of a nibble plane gives two code groups of sixteen rows, one byte shuffle
// each turns their grid indices into levels + 128 (vpdpbusd's unsigned operand), and each
// sub-block's 6-bit scale is decoded once for sixteen rows. In the row layout the one-row kernel
// decodes every row alone and was compute-bound at about half the read bandwidth on 2 cores.
//
// The GEMV sums each 32-element sub-block from -128 x its activations' sum (the levels' offset),
// multiplies by the scale and adds in int32, the GEMM each 16-element half the same way: the same
// exact integers, then the same float rescale, so over a packed weight prefill and decode give the
// same bits.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "backend/cpu/panel_layout.h"
#include "quant/blocks.h"

TS_ISA_BEGIN("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

#include "backend/cpu/gemm_vnni_body.h"
#include "backend/cpu/kgemm_vnni_body.h"

namespace ts::cpu {
namespace {

// Code groups 2q and 2q + 1 of rows 16v .. 16v + 15 of the super-block at blk, as levels + 128.
inline void group_pair(const uint8_t* blk, int q, int v, __m512i levels, __m512i& even,
                       __m512i& odd) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i nib = _mm512_loadu_si512(blk + static_cast<size_t>((q * kPanelVecs + v) * 64));
  even = _mm512_shuffle_epi8(levels, _mm512_and_si512(nib, low4));
  odd = _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(nib, 4), low4));
}

// The scale fields of rows 16v .. 16v + 15 of the super-block at blk (see iq4xs_scale).
struct Iq4XsScales {
  __m512i low, high;
  Iq4XsScales(const uint8_t* blk, int v)
      : low(_mm512_loadu_si512(blk + kIq4XsPanelScalesL +
                               static_cast<size_t>(v * kVecRows) * sizeof(uint32_t))),
        high(_mm512_cvtepu16_epi32(load256(
            blk + kIq4XsPanelScalesH + static_cast<size_t>(v * kVecRows) * sizeof(uint16_t)))) {}
  // Sub-block j's signed scale of the sixteen rows, as int32.
  __m512i scale(int j) const {
    const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(low, 4 * j), _mm512_set1_epi32(15));
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(high, 2 * j), _mm512_set1_epi32(3));
    return _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
  }
};

// Packs one panel: super-blocks [0, nb) of the 32 rows at `rows` (row layout) into `panel`.
void pack_panel_rows(const uint8_t* rows, size_t row_stride, int64_t nb, uint8_t* panel) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = panel + b * kIq4XsPanelBytes;
    for (int v = 0; v < kPanelVecs; ++v) {
      KDecoded k[kVecRows];  // the grid indices, in element order (chunk c: sub-block c)
      for (int j = 0; j < kVecRows; ++j) {
        const int r = v * kVecRows + j;
        const auto& blk = reinterpret_cast<const BlockIQ4_XS*>(rows + r * row_stride)[b];
        for (int c = 0; c < 8; ++c) k[j].u[c] = nibbles32(blk.qs + static_cast<size_t>(16 * c));
        std::memcpy(out + kIq4XsPanelScalesL + r * sizeof(uint32_t), blk.scales_l,
                    sizeof(blk.scales_l));
        std::memcpy(out + kIq4XsPanelScalesH + r * sizeof(uint16_t), &blk.scales_h,
                    sizeof(uint16_t));
        std::memcpy(out + kIq4XsPanelD + r * sizeof(uint16_t), &blk.d, sizeof(uint16_t));
      }
      for (int c = 0; c < 8; ++c) {
        __m512i words[8];
        chunk_groups(k, c, words);
        store_nibble_pairs(words, c, v, out);
      }
    }
  }
}

// The GEMM's source: a chunk of a packed panel laid out as KPacked<DecIQ4_XS> (codes as levels +
// 128, each 16-element half's scale as int32, d widened).
struct PanelSource {
  using P = KPacked<DecIQ4_XS>;
  static_assert(P::kSubs == 16 && P::kMinPairs == 0);
  const WeightView& w;

  void pack(int64_t r, int64_t, int64_t b0, int64_t b1, uint8_t* dst) const {
    const uint8_t* panel = w.data + r * w.row_stride;
    const __m512i levels = iq4_unsigned_levels512();
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* blk = panel + b * kIq4XsPanelBytes;
      uint8_t* out = dst + (b - b0) * P::kBytes;
      for (int q = 0; q < kQKK / 8; ++q)
        for (int v = 0; v < kPanelVecs; ++v) {
          __m512i even, odd;
          group_pair(blk, q, v, levels, even, odd);
          _mm512_storeu_si512(out + P::kCodes + static_cast<size_t>((2 * q * kPanelVecs + v) * 64),
                              even);
          _mm512_storeu_si512(
              out + P::kCodes + static_cast<size_t>(((2 * q + 1) * kPanelVecs + v) * 64), odd);
        }
      for (int v = 0; v < kPanelVecs; ++v) {
        const Iq4XsScales scales(blk, v);
        const size_t lanes = static_cast<size_t>(v * kVecRows) * sizeof(int32_t);
        for (int j = 0; j < 8; ++j)
          for (int half = 0; half < 2; ++half)
            _mm512_storeu_si512(
                out + P::kScales +
                    static_cast<size_t>((2 * j + half) * kPanelRows) * sizeof(int32_t) + lanes,
                scales.scale(j));
        _mm512_storeu_ps(
            out + P::kD + lanes,
            load_f16x16(blk + kIq4XsPanelD + static_cast<size_t>(v * kVecRows) * sizeof(uint16_t)));
        _mm512_storeu_ps(out + P::kDmin + lanes, _mm512_setzero_ps());
      }
    }
  }

  void prefetch(const NextChunk& next, int64_t i, int64_t tiles) const {
    prefetch_packed_chunk(w, next, i, tiles, kIq4XsPanelBytes);
  }
};

void gemm_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t ldy) {
  kgemm<DecIQ4_XS>(PanelSource{w}, x, r0, r1, y, ldy);
}

// One activation row: per panel and super-block, each sub-block's codes dotted with the
// activations (two vpdpbusd per loaded vector) from -128 x their sum, times its scale, summed in
// int32; then the GEMM's float rescale.
// The GEMV prefetches the super-block two ahead, an eighth per sub-block, as q5_k's does: without
// it decode fell short of the read bound (docs/PERFORMANCE.md, "Measured choices").
constexpr int64_t kAhead = 2;
void gemv_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t) {
  const __m512i levels = iq4_unsigned_levels512();
  panel_gemv<BlockQ8K, false>(
      w, x, r0, r1, y, kQKK, kIq4XsPanelBytes, kIq4XsPanelD, 0,
      [&](const uint8_t* blk, const BlockQ8K& xb, __m512i(&itot)[kPanelVecs],
          __m512i(&)[kPanelVecs]) {
        const auto* xq = reinterpret_cast<const uint8_t*>(xb.qs);
        const Iq4XsScales scales[kPanelVecs] = {Iq4XsScales(blk, 0), Iq4XsScales(blk, 1)};
        for (int v = 0; v < kPanelVecs; ++v) itot[v] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          prefetch_span(blk + kAhead * kIq4XsPanelBytes + j * kIq4XsPanelBytes / 8,
                        kIq4XsPanelBytes / 8);
          const __m512i start = _mm512_set1_epi32(-128 * (xb.bsums[2 * j] + xb.bsums[2 * j + 1]));
          __m512i sum[kPanelVecs] = {start, start};
#pragma GCC unroll 4
          for (int q = 4 * j; q < 4 * j + 4; ++q) {
            const __m512i x0 =
                _mm512_set1_epi32(static_cast<int>(load_u32(xq + static_cast<size_t>(8 * q))));
            const __m512i x1 =
                _mm512_set1_epi32(static_cast<int>(load_u32(xq + static_cast<size_t>(8 * q + 4))));
            for (int v = 0; v < kPanelVecs; ++v) {
              __m512i even, odd;
              group_pair(blk, q, v, levels, even, odd);
              sum[v] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum[v], even, x0), odd, x1);
            }
          }
          for (int v = 0; v < kPanelVecs; ++v)
            itot[v] = _mm512_add_epi32(itot[v], _mm512_mullo_epi32(sum[v], scales[v].scale(j)));
        }
      });
}

}  // namespace

RowsKernel avx512vnni_iq4xs_panel_kernel(int64_t M) {
  return M == 1 ? gemv_panels : gemm_panels;
}

void avx512vnni_pack_iq4xs_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                                  int64_t p1) {
  pack_in_place(data, row_stride, p0, p1, [&](const uint8_t* rows, uint8_t* panel) {
    pack_panel_rows(rows, row_stride, cols / kQKK, panel);
  });
}

}  // namespace ts::cpu

TS_ISA_END()
