// Kernels over q6_k weights in the panel layout (panel_layout.h) on AVX512-VNNI: the in-place
// packer run at load, the decode GEMV, and the prefill GEMM of kgemm_vnni_body.h fed from the
// packed panels. As for q4_k (matmul_q4k_panels_avx512vnni.cpp): in the row layout a one-row
// matmul decoded each row's super-block alone and was compute-bound; packed, sixteen rows are a
// vector's lanes, a 16-element sub-block's codes are three loads and a few masks for sixteen rows,
// and its scales one widening load.
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

// The codes of sub-block s's four groups for rows 16v .. 16v + 15 of the super-block at blk:
// the low nibbles from two vectors of the nibble plane, the top bits from one of the high plane,
// moved to bits 4 and 5 (16-bit shifts: the bits that cross into the next byte are masked off).
struct Q6KCodes {
  __m512i g[4];
  Q6KCodes(const uint8_t* blk, int s, int v) {
    const __m512i lo0 = _mm512_loadu_si512(blk + (2 * s * kPanelVecs + v) * 64);
    const __m512i lo1 = _mm512_loadu_si512(blk + ((2 * s + 1) * kPanelVecs + v) * 64);
    const __m512i hi = _mm512_loadu_si512(blk + kQ6KPanelHigh + (s * kPanelVecs + v) * 64);
    g[0] = merge(lo0, _mm512_slli_epi16(hi, 4));
    g[1] = merge(_mm512_srli_epi16(lo0, 4), _mm512_slli_epi16(hi, 2));
    g[2] = merge(lo1, hi);
    g[3] = merge(_mm512_srli_epi16(lo1, 4), _mm512_srli_epi16(hi, 2));
  }
  // (low & 0x0F) | (high & 0x30) per byte: one mask, then one ternary-logic op for (A & C) | B.
  static __m512i merge(__m512i low, __m512i high) {
    return _mm512_ternarylogic_epi32(low, _mm512_and_si512(high, _mm512_set1_epi8(0x30)),
                                     _mm512_set1_epi8(0x0F), 0xEC);
  }
};

// Sub-block s's scales of rows 16v .. 16v + 15, widened to int32.
inline __m512i q6k_scales(const uint8_t* blk, int s, int v) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(
      reinterpret_cast<const __m128i*>(blk + kQ6KPanelScales + s * kPanelRows + v * kVecRows)));
}

// Packs one panel: super-blocks [0, nb) of the 32 rows at `rows` (row layout) into `panel`.
void pack_q6k_panel(const uint8_t* rows, size_t row_stride, int64_t nb, uint8_t* panel) {
  const __m512i low2 = _mm512_set1_epi8(0x03);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = panel + b * kQ6KPanelBytes;
    for (int v = 0; v < kPanelVecs; ++v) {
      KDecoded k[kVecRows];
      for (int j = 0; j < kVecRows; ++j) {
        const int r = v * kVecRows + j;
        const auto& blk = reinterpret_cast<const BlockQ6_K*>(rows + r * row_stride)[b];
        DecQ6_K::decode(blk, k[j]);
        for (int s = 0; s < kQKK / 16; ++s)
          out[kQ6KPanelScales + s * kPanelRows + r] = static_cast<uint8_t>(blk.scales[s]);
        std::memcpy(out + kQ6KPanelD + r * sizeof(uint16_t), &blk.d, sizeof(uint16_t));
      }
      // Chunk c of the decoded rows holds their code groups 8c .. 8c + 7 (codes < 64, so 16-bit
      // shifts of masked values stay within their bytes).
      for (int c = 0; c < 8; ++c) {
        __m512i words[8];
        chunk_groups(k, c, words);
        store_nibble_pairs(words, c, v, out);
        for (int o = 0; o < 2; ++o) {
          __m512i high = _mm512_setzero_si512();
          for (int g = 0; g < 4; ++g)
            high = _mm512_or_si512(
                high, _mm512_slli_epi16(
                          _mm512_and_si512(_mm512_srli_epi16(words[4 * o + g], 4), low2), 2 * g));
          _mm512_storeu_si512(out + kQ6KPanelHigh + ((2 * c + o) * kPanelVecs + v) * 64, high);
        }
      }
    }
  }
}

// The GEMM's source: a chunk of a packed panel laid out as KPacked<DecQ6_K> (codes merged to
// bytes, scales widened, d as floats).
struct PanelSource {
  using P = KPacked<DecQ6_K>;
  static_assert(P::kSubs == 16 && P::kMinPairs == 0);
  const WeightView& w;

  void pack(int64_t r, int64_t, int64_t b0, int64_t b1, uint8_t* dst) const {
    const uint8_t* panel = w.data + r * w.row_stride;
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* blk = panel + b * kQ6KPanelBytes;
      uint8_t* out = dst + (b - b0) * P::kBytes;
      for (int s = 0; s < kQKK / 16; ++s)
        for (int v = 0; v < kPanelVecs; ++v) {
          const Q6KCodes codes(blk, s, v);
          for (int g = 0; g < 4; ++g)
            _mm512_storeu_si512(out + P::kCodes + ((4 * s + g) * kPanelVecs + v) * 64, codes.g[g]);
          _mm512_storeu_si512(out + P::kScales + (s * kPanelRows + v * kVecRows) * sizeof(int32_t),
                              q6k_scales(blk, s, v));
        }
      for (int v = 0; v < kPanelVecs; ++v) {
        const size_t lanes = v * kVecRows * sizeof(float);
        _mm512_storeu_ps(out + P::kD + lanes,
                         load_f16x16(blk + kQ6KPanelD + v * kVecRows * sizeof(uint16_t)));
        _mm512_storeu_ps(out + P::kDmin + lanes, _mm512_setzero_ps());
      }
    }
  }

  void prefetch(const NextChunk& next, int64_t i, int64_t tiles) const {
    prefetch_packed_chunk(w, next, i, tiles, kQ6KPanelBytes);
  }
};

void gemm_q6k_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                     int64_t ldy) {
  kgemm<DecQ6_K>(PanelSource{w}, x, r0, r1, y, ldy);
}

// One activation row: per panel and super-block, each sub-block's codes dotted with the
// activations from -32 x their sum (the codes' offset), times its scale, summed exactly in int32
// as the GEMM does; then the GEMM's float rescale.
void gemv_q6k_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                     int64_t) {
  panel_gemv<BlockQ8K, false>(
      w, x, r0, r1, y, kQKK, kQ6KPanelBytes, kQ6KPanelD, 0,
      [](const uint8_t* blk, const BlockQ8K& xb, __m512i(&itot)[kPanelVecs],
         __m512i(&)[kPanelVecs]) {
        const auto* xq = reinterpret_cast<const uint8_t*>(xb.qs);
        for (int v = 0; v < kPanelVecs; ++v) itot[v] = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int s = 0; s < kQKK / 16; ++s) {
          // The super-block two ahead, a sixteenth at a time: its planes are three streams
          // (codes, top bits, scales), which the hardware prefetchers followed too late.
          prefetch_span(blk + 2 * kQ6KPanelBytes + s * kQ6KPanelBytes / 16, kQ6KPanelBytes / 16);
          __m512i xv[4];
          for (int g = 0; g < 4; ++g)
            xv[g] = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 16 * s + 4 * g)));
          const __m512i start = _mm512_set1_epi32(-xb.bsums[s] * (1 << DecQ6_K::kOffsetShift));
          for (int v = 0; v < kPanelVecs; ++v) {
            const Q6KCodes codes(blk, s, v);
            __m512i sum = start;
            for (int g = 0; g < 4; ++g) sum = _mm512_dpbusd_epi32(sum, codes.g[g], xv[g]);
            itot[v] = _mm512_add_epi32(itot[v], _mm512_mullo_epi32(sum, q6k_scales(blk, s, v)));
          }
        }
      });
}

}  // namespace

RowsKernel avx512vnni_q6k_panel_kernel(int64_t M) {
  return M == 1 ? gemv_q6k_panels : gemm_q6k_panels;
}

void avx512vnni_pack_q6k_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                                int64_t p1) {
  pack_in_place(data, row_stride, p0, p1, [&](const uint8_t* rows, uint8_t* panel) {
    pack_q6k_panel(rows, row_stride, cols / kQKK, panel);
  });
}

}  // namespace ts::cpu

TS_ISA_END()
