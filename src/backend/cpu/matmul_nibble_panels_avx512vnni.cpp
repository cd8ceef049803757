// Kernels over q4_0, iq4_nl, q5_0 (q4_1, q5_1, mxfp4) weights in the panel layout (panel_layout.h)
// on AVX512-VNNI: the in-place packer run at load, the decode GEMV, and the prefill GEMM of
// gemm_vnni_body.h fed from the packed panels. q4_0 and iq4_nl share the block shape (an f16 d and
// 32 four-bit codes) and so the layout; q4_0's code is its value + 8, iq4_nl's an index into the
// grid, which a byte shuffle turns into level + 128; q5_0 adds a plane of fifth bits. In the row
// layout the one-row kernel decodes each row's block alone and was compute-bound below the read
// bandwidth on 2 cores; packed, one load of a nibble vector gives two code groups of sixteen rows.
//
// The GEMV sums each block from -offset x its activations' sum, as the GEMM's micro-kernel does,
// then applies the same float rescale: over a packed weight prefill and decode give the same
// bits.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "backend/cpu/panel_layout.h"
#include "core/error.h"
#include "quant/blocks.h"

TS_ISA_BEGIN("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

#include "backend/cpu/gemm_vnni_body.h"

namespace ts::cpu {
namespace {

static_assert(sizeof(BlockQ4_0) == sizeof(BlockIQ4_NL) &&
                  offsetof(BlockQ4_0, qs) == offsetof(BlockIQ4_NL, qs),
              "q4_0 and iq4_nl blocks share one shape: the packer reads both as q4_0");

// Code groups 2h and 2h + 1 of rows 16v .. 16v + 15 of the packed block at pb: its nibbles.
inline void nibble_pair(const uint8_t* pb, int h, int v, __m512i& even, __m512i& odd) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i nib = _mm512_loadu_si512(pb + static_cast<size_t>((h * kPanelVecs + v) * 64));
  even = _mm512_and_si512(nib, low4);
  odd = _mm512_and_si512(_mm512_srli_epi16(nib, 4), low4);
}

// Adds to code groups 2h and 2h + 1 their fifth bits from the plane at `fifth` (bit g of a byte
// for code group g) at bit 4.
inline void fifth_pair(const uint8_t* fifth, int h, int v, __m512i& even, __m512i& odd) {
  const __m512i bits = _mm512_loadu_si512(fifth + static_cast<size_t>(v * 64));
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  even = _mm512_or_si512(even, _mm512_and_si512(move_bit512(bits, 2 * h, 4), bit4));
  odd = _mm512_or_si512(odd, _mm512_and_si512(move_bit512(bits, 2 * h + 1, 4), bit4));
}

// Each type's packed block (panel_layout.h: its bytes, fifth-bit plane, d and m) and how its code
// groups become vpdpbusd's unsigned operands: the nibbles as they are (q4_0, q4_1), through the
// grid (iq4_nl: level + 128, a byte shuffle), or with their fifth bits (q5_0, q5_1). PackDec reads
// the row layout's codes for the packer (iq4_nl's indices as q4_0's nibbles).
template <class D, DType kType, size_t kBlockBytes, size_t kFifthAt, size_t kDAt, size_t kMAt>
struct NibblePanel {
  using Dec = D;
  using PackDec = D;
  static constexpr DType kPackType = kType;
  static constexpr bool kFifth = kFifthAt != 0;
  static constexpr size_t kBytes = kBlockBytes, kFifthPlane = kFifthAt, kD = kDAt, kM = kMAt;
  void pair(const uint8_t* pb, int h, int v, __m512i& even, __m512i& odd) const {
    nibble_pair(pb, h, v, even, odd);
    if constexpr (kFifth) fifth_pair(pb + kFifthPlane, h, v, even, odd);
  }
};
using Q4_0Panel = NibblePanel<DecQ4_0, DType::Q4_0, kNibblePanelBytes, 0, kNibblePanelD, 0>;
using Q5_0Panel =
    NibblePanel<DecQ5_0, DType::Q5_0, kQ5_0PanelBytes, kQ5_0PanelFifth, kQ5_0PanelD, 0>;
using Q4_1Panel = NibblePanel<DecQ4_1, DType::Q4_1, kQ4_1PanelBytes, 0, kQ4_1PanelD, kQ4_1PanelM>;
using Q5_1Panel =
    NibblePanel<DecQ5_1, DType::Q5_1, kQ5_1PanelBytes, kQ5_1PanelFifth, kQ5_1PanelD, kQ5_1PanelM>;
// A type whose nibbles index a table of values (iq4_nl's grid, mxfp4's doubled e2m1 values): the
// table's byte shuffle gives vpdpbusd's unsigned operand, value + 128.
template <class Base, class D, const int8_t (&kTable)[16]>
struct TablePanel : Base {
  using Dec = D;
  __m512i values;
  TablePanel() : values(unsigned_table512(kTable)) {}
  void pair(const uint8_t* pb, int h, int v, __m512i& even, __m512i& odd) const {
    nibble_pair(pb, h, v, even, odd);
    even = _mm512_shuffle_epi8(values, even);
    odd = _mm512_shuffle_epi8(values, odd);
  }
};
using Iq4NlPanel = TablePanel<Q4_0Panel, DecIQ4_NL, kIq4Levels>;

// MXFP4's row-layout block as plain nibbles, for the packer (its e8m0 byte the rows' scale).
struct DecMXFP4Nibbles {
  using Block = BlockMXFP4;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = false, kSigned = false;
  template <class Ops>
  static __m256i codes(const Block& b) {
    return nibbles32(b.qs);
  }
};

struct Mxfp4Panel
    : TablePanel<NibblePanel<DecMXFP4Nibbles, DType::MXFP4, kMxfp4PanelBytes, 0, kMxfp4PanelE, 0>,
                 DecMXFP4, kMxfp4Doubled> {};

// The GEMM reads blocks [b0, b1) of a panel unpacked into the 32-element GEMM's layout.
template <class L>
void gemm_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t ldy) {
  using Dec = typename L::Dec;
  constexpr size_t stride = packed_block_bytes<Dec>();
  thread_local std::vector<uint8_t> chunk;
  chunk.resize(kChunkBlocks * stride);
  thread_local std::vector<int32_t> starts;
  block_starts<Dec>(x, starts);
  const L layout;
  panel_gemm(
      r0, r1, x.K / kQK32, x.M, kChunkBlocks,
      [&](int64_t r, int64_t, int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const uint8_t* pb = w.data + r * w.row_stride + b * L::kBytes;
          uint8_t* out = chunk.data() + (b - b0) * stride;
          for (int h = 0; h < 4; ++h)
            for (int v = 0; v < kPanelVecs; ++v) {
              __m512i even, odd;
              layout.pair(pb, h, v, even, odd);
              _mm512_storeu_si512(out + static_cast<size_t>((2 * h * kPanelVecs + v) * 64), even);
              _mm512_storeu_si512(out + static_cast<size_t>(((2 * h + 1) * kPanelVecs + v) * 64),
                                  odd);
            }
          std::memcpy(out + kPanelCodeBytes, pb + L::kD,
                      kPanelRows * sizeof(typename ScaleOf<Dec>::T));
          if constexpr (Dec::kMin)
            std::memcpy(out + kPanelCodeBytes + kPanelRows * sizeof(uint16_t), pb + L::kM,
                        kPanelRows * sizeof(uint16_t));
        }
        return static_cast<const uint8_t*>(chunk.data());
      },
      [&](const NextChunk& next, int64_t i, int64_t tiles) {
        prefetch_packed_chunk(w, next, i, tiles, L::kBytes);
      },
      [&]<int T>(const uint8_t* data, int64_t m0, int64_t b0, int64_t b1, int64_t r,
                 const __mmask16* mask, bool first) {
        micro<Dec, T>(data, x, starts.data(), m0, b0, b1, y, ldy, r, mask, first);
      });
}

// The GEMVs prefetch the block this many ahead (2.3 KB for q4_0): one panel's stream of small
// blocks, read with few operations per byte, was left waiting on DRAM by the hardware prefetchers
// (4 ahead came closest to the read bound: docs/PERFORMANCE.md, "Measured choices").
constexpr int64_t kAhead = 4;

// A block's exact int32 sums for the panel's two vectors of sixteen rows: the codes dotted with the
// activations (two vpdpbusd per loaded vector, even and odd groups in two chains) from -offset x
// their sum.
template <class L>
inline void block_sums(const L& layout, const uint8_t* pb, const BlockQ8A32& xb,
                       __m512i (&itot)[kPanelVecs]) {
  const auto* xq = reinterpret_cast<const uint8_t*>(xb.qs);
  prefetch_span(pb + kAhead * L::kBytes, L::kBytes);
  const __m512i start = _mm512_set1_epi32(-L::Dec::kOffset * xb.sum);
  __m512i even_sum[kPanelVecs] = {start, start};
  __m512i odd_sum[kPanelVecs] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int h = 0; h < 4; ++h) {
    const __m512i x0 = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 8 * h)));
    const __m512i x1 = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 8 * h + 4)));
    for (int v = 0; v < kPanelVecs; ++v) {
      __m512i even, odd;
      layout.pair(pb, h, v, even, odd);
      even_sum[v] = _mm512_dpbusd_epi32(even_sum[v], even, x0);
      odd_sum[v] = _mm512_dpbusd_epi32(odd_sum[v], odd, x1);
    }
  }
  for (int v = 0; v < kPanelVecs; ++v) itot[v] = _mm512_add_epi32(even_sum[v], odd_sum[v]);
}

// One activation row: per panel and block, the block's sums; then the GEMM's float rescale.
template <class L>
void gemv_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t) {
  const L layout;
  panel_gemv<BlockQ8A32, false>(
      w, x, r0, r1, y, kQK32, L::kBytes, L::kD, 0,
      [&](const uint8_t* pb, const BlockQ8A32& xb, __m512i(&itot)[kPanelVecs],
          __m512i(&)[kPanelVecs]) { block_sums(layout, pb, xb, itot); });
}

// One activation row of MXFP4 in its two planes (packed rows 0 and 1, PackedActs): each block's
// codes looked up once for both planes' sums, then the GEMM's float rescale per plane, into y rows
// 0 and 1 (which matmul_rows adds): the GEMM's bits.
template <class L>
void gemv_two_plane_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1,
                           float* y, int64_t ldy) {
  using Scale = ScaleOf<typename L::Dec>;
  constexpr int kPlanes = 2;
  const L layout;
  const int64_t nb = x.K / kQK32;
  const BlockQ8A32* xs[kPlanes];
  for (int p = 0; p < kPlanes; ++p)
    xs[p] = reinterpret_cast<const BlockQ8A32*>(x.data.data() + p * x.row_bytes);
  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const uint8_t* panel = w.data + r * w.row_stride;
    __m512 acc[kPlanes][kPanelVecs];
    for (auto& plane : acc)
      for (auto& a : plane) a = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* pb = panel + b * L::kBytes;
      prefetch_span(pb + kAhead * L::kBytes, L::kBytes);
      __m512i even_sum[kPlanes][kPanelVecs], odd_sum[kPlanes][kPanelVecs];
      for (int p = 0; p < kPlanes; ++p)
        for (int v = 0; v < kPanelVecs; ++v) {
          even_sum[p][v] = _mm512_set1_epi32(-L::Dec::kOffset * xs[p][b].sum);
          odd_sum[p][v] = _mm512_setzero_si512();
        }
      for (int h = 0; h < 4; ++h) {
        __m512i x0[kPlanes], x1[kPlanes];
        for (int p = 0; p < kPlanes; ++p) {
          const auto* xq = reinterpret_cast<const uint8_t*>(xs[p][b].qs);
          x0[p] = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 8 * h)));
          x1[p] = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 8 * h + 4)));
        }
        for (int v = 0; v < kPanelVecs; ++v) {
          __m512i even, odd;
          layout.pair(pb, h, v, even, odd);
          for (int p = 0; p < kPlanes; ++p) {
            even_sum[p][v] = _mm512_dpbusd_epi32(even_sum[p][v], even, x0[p]);
            odd_sum[p][v] = _mm512_dpbusd_epi32(odd_sum[p][v], odd, x1[p]);
          }
        }
      }
      for (int v = 0; v < kPanelVecs; ++v) {
        const __m512 dv = Scale::load16(pb + L::kD + v * kVecRows * sizeof(typename Scale::T));
        for (int p = 0; p < kPlanes; ++p) {
          const __m512i itot = _mm512_add_epi32(even_sum[p][v], odd_sum[p][v]);
          acc[p][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(itot),
                                      _mm512_mul_ps(dv, _mm512_set1_ps(xs[p][b].d)), acc[p][v]);
        }
      }
    }
    for (int p = 0; p < kPlanes; ++p)
      for (int v = 0; v < kPanelVecs; ++v)
        _mm512_storeu_ps(y + p * ldy + r + v * kVecRows, acc[p][v]);
  }
}

// One activation row of a type with a min (q4_1, q5_1): the block's sums, then micro()'s
// epilogue in its order, d x the activations' scale times the sums, plus m times the activation
// block's scale x sum.
template <class L>
void gemv_min_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                     int64_t) {
  const L layout;
  const int64_t nb = x.K / kQK32;
  const auto* xb = reinterpret_cast<const BlockQ8A32*>(x.data.data());
  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const uint8_t* panel = w.data + r * w.row_stride;
    __m512 acc[kPanelVecs] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* pb = panel + b * L::kBytes;
      __m512i itot[kPanelVecs];
      block_sums(layout, pb, xb[b], itot);
      for (int v = 0; v < kPanelVecs; ++v) {
        const size_t halves = static_cast<size_t>(v * kVecRows) * sizeof(uint16_t);
        const __m512 scale =
            _mm512_mul_ps(load_f16x16(pb + L::kD + halves), _mm512_set1_ps(xb[b].d));
        acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(itot[v]), scale, acc[v]);
        acc[v] = _mm512_fmadd_ps(load_f16x16(pb + L::kM + halves),
                                 _mm512_set1_ps(xb[b].d * static_cast<float>(xb[b].sum)), acc[v]);
      }
    }
    for (int v = 0; v < kPanelVecs; ++v) _mm512_storeu_ps(y + r + v * kVecRows, acc[v]);
  }
}

// Packs one panel: the 32 rows' blocks regrouped into the GEMM's byte layout (codes 0..15, or
// 0..31 for q5_0), then each pair of code groups folded into nibbles and, for q5_0, the groups'
// fifth bits gathered into a plane.
template <class L>
void pack_panel_rows(const uint8_t* rows, size_t row_stride, int64_t cols, uint8_t* panel) {
  using PackDec = typename L::PackDec;
  constexpr size_t stride = packed_block_bytes<PackDec>();
  const int64_t nb = cols / kQK32;
  std::vector<uint8_t> bytes(static_cast<size_t>(nb) * stride);
  const WeightView view{L::kPackType, rows, kPanelRows, cols, row_stride};
  pack_panel<PackDec>(view, 0, kPanelRows, 0, nb, bytes.data());
  const __m512i low4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* in = bytes.data() + b * stride;
    uint8_t* out = panel + b * L::kBytes;
    for (int v = 0; v < kPanelVecs; ++v) {
      __m512i fifth = _mm512_setzero_si512();
      for (int h = 0; h < 4; ++h) {
        const __m512i even =
            _mm512_loadu_si512(in + static_cast<size_t>((2 * h * kPanelVecs + v) * 64));
        const __m512i odd =
            _mm512_loadu_si512(in + static_cast<size_t>(((2 * h + 1) * kPanelVecs + v) * 64));
        _mm512_storeu_si512(out + static_cast<size_t>((h * kPanelVecs + v) * 64),
                            _mm512_or_si512(_mm512_and_si512(even, low4),
                                            _mm512_slli_epi16(_mm512_and_si512(odd, low4), 4)));
        if constexpr (L::kFifth) {
          // Bit 4 of group g's codes to bit g (masked bits: shifts stay within their bytes).
          const int g = 2 * h;
          fifth = _mm512_or_si512(fifth, move_bit512(_mm512_and_si512(even, bit4), 4, g));
          fifth = _mm512_or_si512(fifth, move_bit512(_mm512_and_si512(odd, bit4), 4, g + 1));
        }
      }
      if constexpr (L::kFifth)
        _mm512_storeu_si512(out + L::kFifthPlane + static_cast<size_t>(v * 64), fifth);
    }
    std::memcpy(out + L::kD, in + kPanelCodeBytes,
                kPanelRows * sizeof(typename ScaleOf<PackDec>::T));
    if constexpr (PackDec::kMin)
      std::memcpy(out + L::kM, in + kPanelCodeBytes + kPanelRows * sizeof(uint16_t),
                  kPanelRows * sizeof(uint16_t));
  }
}

template <class L>
void pack_panels_of(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0, int64_t p1) {
  pack_in_place(data, row_stride, p0, p1, [&](const uint8_t* rows, uint8_t* panel) {
    pack_panel_rows<L>(rows, row_stride, cols, panel);
  });
}

}  // namespace

RowsKernel avx512vnni_nibble_panel_kernel(DType t, int64_t M) {
  switch (t) {
    case DType::Q4_0:
      return M == 1 ? gemv_panels<Q4_0Panel> : gemm_panels<Q4_0Panel>;
    case DType::IQ4_NL:
      return M == 1 ? gemv_panels<Iq4NlPanel> : gemm_panels<Iq4NlPanel>;
    case DType::Q5_0:
      return M == 1 ? gemv_panels<Q5_0Panel> : gemm_panels<Q5_0Panel>;
    case DType::MXFP4:  // one activation row is M = 2: its two planes
      return M == 2 ? gemv_two_plane_panels<Mxfp4Panel> : gemm_panels<Mxfp4Panel>;
    case DType::Q4_1:
      return M == 1 ? gemv_min_panels<Q4_1Panel> : gemm_panels<Q4_1Panel>;
    case DType::Q5_1:
      return M == 1 ? gemv_min_panels<Q5_1Panel> : gemm_panels<Q5_1Panel>;
    default:
      return nullptr;
  }
}

void avx512vnni_pack_nibble_panels(DType t, uint8_t* data, int64_t cols, size_t row_stride,
                                   int64_t p0, int64_t p1) {
  switch (t) {
    case DType::Q4_0:
    case DType::IQ4_NL:  // iq4_nl's indices pack as q4_0's nibbles
      return pack_panels_of<Q4_0Panel>(data, cols, row_stride, p0, p1);
    case DType::Q5_0:
      return pack_panels_of<Q5_0Panel>(data, cols, row_stride, p0, p1);
    case DType::MXFP4:
      return pack_panels_of<Mxfp4Panel>(data, cols, row_stride, p0, p1);
    case DType::Q4_1:
      return pack_panels_of<Q4_1Panel>(data, cols, row_stride, p0, p1);
    case DType::Q5_1:
      return pack_panels_of<Q5_1Panel>(data, cols, row_stride, p0, p1);
    default:
      fail(ErrorKind::Runtime,
           std::string("pack_panels: ") + dtype_name(t) + " has no nibble panel layout");
  }
}

}  // namespace ts::cpu

TS_ISA_END()
