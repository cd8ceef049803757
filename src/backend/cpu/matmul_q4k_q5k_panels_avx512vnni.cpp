// Kernels over q4_k and q5_k weights in the panel layout (panel_layout.h) on AVX512-VNNI: the
// in-place packer run at load, the decode GEMV, and the prefill GEMM of kgemm_vnni_body.h fed from
// the packed panels. The two types differ only in q5_k's plane of fifth bits.
//
// In the row layout a one-row matmul decodes each row's super-block on its own (nibbles, 6-bit
// scales, the scale vectors of its chunks: ~60 vector operations for 256 weights), which left
// decode compute-bound below a core's read bandwidth. Packed, sixteen rows are the lanes of
// a vector: a pair of code groups is one load, two nibble masks and two vpdpbusd for sixteen rows,
// and each sub-block's scales and mins are decoded once for sixteen rows.
//
// The GEMV computes each output exactly as the GEMM does (the same exact int32 sums of the
// super-block, the same float operations in the same order), so over a packed weight prefill and
// decode give the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "backend/cpu/panel_layout.h"
#include "quant/blocks.h"

TS_ISA_BEGIN("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

#include "backend/cpu/gemm_vnni_body.h"
#include "backend/cpu/kgemm_vnni_body.h"

namespace ts::cpu {
namespace {

// Where each part of a packed super-block lies (panel_layout.h).
struct Q4KPanel {
  using Dec = DecQ4_K;
  using Block = BlockQ4_K;
  static constexpr bool kFifth = false;
  static constexpr size_t kFifthAt = 0, kWords = kQ4KPanelWords, kD = kQ4KPanelD,
                          kDmin = kQ4KPanelDmin, kBytes = kQ4KPanelBytes;
};
struct Q5KPanel {
  using Dec = DecQ5_K;
  using Block = BlockQ5_K;
  static constexpr bool kFifth = true;
  static constexpr size_t kFifthAt = kQ5KPanelFifth, kWords = kQ5KPanelWords, kD = kQ5KPanelD,
                          kDmin = kQ5KPanelDmin, kBytes = kQ5KPanelBytes;
};

// Sub-block j's 6-bit field of sixteen rows from their packed words (see k4_scale_min): for the
// scales (low = w0, high = w2, shift 0), bits 0-5 of byte j of w0 for j < 4, else the low nibble
// of byte j - 4 of w2 and the top two bits of byte j - 4 of w0; for the mins (w1, w2, shift 4)
// the same with w1 and w2's high nibble.
inline __m512i k4_field(__m512i low, __m512i high, int j, int shift) {
  if (j < 4) return _mm512_and_si512(_mm512_srli_epi32(low, 8 * j), _mm512_set1_epi32(63));
  const int s = 8 * (j - 4);
  return _mm512_or_si512(
      _mm512_and_si512(_mm512_srli_epi32(high, s + shift), _mm512_set1_epi32(15)),
      _mm512_and_si512(_mm512_srli_epi32(low, s + 2), _mm512_set1_epi32(0x30)));
}

// The packed words w0, w1, w2 of rows 16v .. 16v + 15 of the super-block at blk.
template <class L>
struct K4Words {
  __m512i w0, w1, w2;
  K4Words(const uint8_t* blk, int v) {
    const uint8_t* words = blk + L::kWords + v * kVecRows * sizeof(int32_t);
    w0 = _mm512_loadu_si512(words);
    w1 = _mm512_loadu_si512(words + kPanelRows * sizeof(int32_t));
    w2 = _mm512_loadu_si512(words + 2 * kPanelRows * sizeof(int32_t));
  }
  __m512i scale(int j) const { return k4_field(w0, w2, j, 0); }
  __m512i min(int j) const { return k4_field(w1, w2, j, 4); }
};

// The codes of groups 2q and 2q + 1 for rows 16v .. 16v + 15 of the super-block at blk: the
// nibbles of one vector, with q5_k's fifth bits (bit g % 8 of sub-block q / 4's fifth-bit vector
// for group g) moved to bit 4.
template <class L>
inline void group_pair(const uint8_t* blk, int q, int v, __m512i& even, __m512i& odd) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i nib = _mm512_loadu_si512(blk + (q * kPanelVecs + v) * 64);
  if constexpr (!L::kFifth) {
    even = _mm512_and_si512(nib, low4);
    odd = _mm512_and_si512(_mm512_srli_epi16(nib, 4), low4);
  } else {
    const __m512i fifth = _mm512_loadu_si512(blk + L::kFifthAt + ((q / 4) * kPanelVecs + v) * 64);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    const int k = 2 * (q % 4);
    // (A & 0x0F) | B per byte, B the fifth bit alone: one ternary-logic op.
    even = _mm512_ternarylogic_epi32(nib, _mm512_and_si512(move_bit512(fifth, k, 4), bit4), low4,
                                     0xEC);
    odd =
        _mm512_ternarylogic_epi32(_mm512_srli_epi16(nib, 4),
                                  _mm512_and_si512(move_bit512(fifth, k + 1, 4), bit4), low4, 0xEC);
  }
}

// Packs one panel: super-blocks [0, nb) of the 32 rows at `rows` (row layout) into `panel`.
template <class L>
void pack_panel_rows(const uint8_t* rows, size_t row_stride, int64_t nb, uint8_t* panel) {
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = panel + b * L::kBytes;
    for (int v = 0; v < kPanelVecs; ++v) {
      KDecoded k[kVecRows];
      for (int j = 0; j < kVecRows; ++j) {
        const int r = v * kVecRows + j;
        const auto& blk = reinterpret_cast<const typename L::Block*>(rows + r * row_stride)[b];
        L::Dec::decode(blk, k[j]);
        for (int w = 0; w < 3; ++w)
          std::memcpy(out + L::kWords + (w * kPanelRows + r) * sizeof(int32_t), blk.scales + 4 * w,
                      sizeof(int32_t));
        std::memcpy(out + L::kD + r * sizeof(uint16_t), &blk.d, sizeof(uint16_t));
        std::memcpy(out + L::kDmin + r * sizeof(uint16_t), &blk.dmin, sizeof(uint16_t));
      }
      // Chunk c of the decoded rows holds their code groups 8c .. 8c + 7 (codes 32c .. 32c + 31,
      // sub-block c). Their fifth bits go to bits 0-7 of a byte (codes are < 32, so 16-bit shifts
      // of the masked bit stay within its byte).
      for (int c = 0; c < 8; ++c) {
        __m512i words[8];
        chunk_groups(k, c, words);
        store_nibble_pairs(words, c, v, out);
        if constexpr (L::kFifth) {
          __m512i fifth = _mm512_setzero_si512();
          for (int g = 0; g < 8; ++g)
            fifth = _mm512_or_si512(fifth, move_bit512(_mm512_and_si512(words[g], bit4), 4, g));
          _mm512_storeu_si512(out + L::kFifthAt + (c * kPanelVecs + v) * 64, fifth);
        }
      }
    }
  }
}

// The GEMM's source: a chunk of a packed panel laid out as KPacked<Dec> (codes as bytes, scales
// and mins decoded, d and dmin widened), a few vector operations per 64 bytes.
template <class L>
struct PanelSource {
  using P = KPacked<typename L::Dec>;
  static_assert(P::kSubs == 8 && P::kMinPairs == 8);
  const WeightView& w;

  void pack(int64_t r, int64_t, int64_t b0, int64_t b1, uint8_t* dst) const {
    const uint8_t* panel = w.data + r * w.row_stride;
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* blk = panel + b * L::kBytes;
      uint8_t* out = dst + (b - b0) * P::kBytes;
      for (int q = 0; q < kQKK / 8; ++q)
        for (int v = 0; v < kPanelVecs; ++v) {
          __m512i even, odd;
          group_pair<L>(blk, q, v, even, odd);
          _mm512_storeu_si512(out + P::kCodes + (2 * q * kPanelVecs + v) * 64, even);
          _mm512_storeu_si512(out + P::kCodes + ((2 * q + 1) * kPanelVecs + v) * 64, odd);
        }
      for (int v = 0; v < kPanelVecs; ++v) {
        const K4Words<L> words(blk, v);
        const size_t lanes = v * kVecRows * sizeof(int32_t);
        for (int j = 0; j < 8; ++j) {
          const size_t at = j * kPanelRows * sizeof(int32_t) + lanes;
          _mm512_storeu_si512(out + P::kScales + at, words.scale(j));
          // Both halves of the pair (16-element sub-blocks 2j and 2j + 1) have the same min.
          const __m512i m = words.min(j);
          _mm512_storeu_si512(out + P::kMins + at, _mm512_or_si512(m, _mm512_slli_epi32(m, 16)));
        }
        const size_t halves = v * kVecRows * sizeof(uint16_t);
        _mm512_storeu_ps(out + P::kD + lanes, load_f16x16(blk + L::kD + halves));
        _mm512_storeu_ps(out + P::kDmin + lanes, load_f16x16(blk + L::kDmin + halves));
      }
    }
  }

  void prefetch(const NextChunk& next, int64_t i, int64_t tiles) const {
    prefetch_packed_chunk(w, next, i, tiles, L::kBytes);
  }
};

template <class L>
void gemm_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t ldy) {
  kgemm<typename L::Dec>(PanelSource<L>{w}, x, r0, r1, y, ldy);
}

// One activation row: per panel and super-block, each sub-block's codes dotted with the
// activations (two vpdpbusd per loaded vector), times its scale, summed exactly in int32 as the
// GEMM does; the min term likewise; then the GEMM's float rescale.
template <class L>
void gemv_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t) {
  panel_gemv<BlockQ8K, true>(
      w, x, r0, r1, y, kQKK, L::kBytes, L::kD, L::kDmin,
      [](const uint8_t* blk, const BlockQ8K& xb, __m512i(&itot)[kPanelVecs],
         __m512i(&mtot)[kPanelVecs]) {
        const auto* xq = reinterpret_cast<const uint8_t*>(xb.qs);
        const K4Words<L> words[kPanelVecs] = {K4Words<L>(blk, 0), K4Words<L>(blk, 1)};
        for (int v = 0; v < kPanelVecs; ++v) itot[v] = mtot[v] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          // q5_k: the super-block two ahead, an eighth at a time: with the fifth bits its codes
          // are two streams, which the hardware prefetchers followed too late (q4_k: no gain).
          if constexpr (L::kFifth)
            prefetch_span(blk + 2 * L::kBytes + j * L::kBytes / 8, L::kBytes / 8);
          __m512i sum[kPanelVecs] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
          for (int q = 4 * j; q < 4 * j + 4; ++q) {
            const __m512i x0 = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 8 * q)));
            const __m512i x1 = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 8 * q + 4)));
            for (int v = 0; v < kPanelVecs; ++v) {
              __m512i even, odd;
              group_pair<L>(blk, q, v, even, odd);
              sum[v] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum[v], even, x0), odd, x1);
            }
          }
          const __m512i xsum = _mm512_set1_epi32(xb.bsums[2 * j] + xb.bsums[2 * j + 1]);
          for (int v = 0; v < kPanelVecs; ++v) {
            itot[v] = _mm512_add_epi32(itot[v], _mm512_mullo_epi32(sum[v], words[v].scale(j)));
            mtot[v] = _mm512_add_epi32(mtot[v], _mm512_mullo_epi32(words[v].min(j), xsum));
          }
        }
      });
}

}  // namespace

RowsKernel avx512vnni_q4k_panel_kernel(int64_t M) {
  return M == 1 ? gemv_panels<Q4KPanel> : gemm_panels<Q4KPanel>;
}

RowsKernel avx512vnni_q5k_panel_kernel(int64_t M) {
  return M == 1 ? gemv_panels<Q5KPanel> : gemm_panels<Q5KPanel>;
}

void avx512vnni_pack_q4k_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                                int64_t p1) {
  pack_in_place(data, row_stride, p0, p1, [&](const uint8_t* rows, uint8_t* panel) {
    pack_panel_rows<Q4KPanel>(rows, row_stride, cols / kQKK, panel);
  });
}

void avx512vnni_pack_q5k_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                                int64_t p1) {
  pack_in_place(data, row_stride, p0, p1, [&](const uint8_t* rows, uint8_t* panel) {
    pack_panel_rows<Q5KPanel>(rows, row_stride, cols / kQKK, panel);
  });
}

}  // namespace ts::cpu

TS_ISA_END()
