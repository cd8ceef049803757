// The register-blocked AVX512-VNNI GEMM over panels of 32 weight rows, shared by the kernel that
// regroups file-layout rows into panels per matmul (matmul_gemm_avx512vnni.cpp) and the kernels
// over weights packed once at load (matmul_panels_avx512vnni.cpp); its panel loop, prefetches and
// in-place packing also serve the k-quant GEMM (kgemm_vnni_body.h and the files that include it).
// Include it only in those files, inside the file's VNNI target pragma: it includes
// matmul_x86_body.h (whose helpers and decoders it uses) and, like that header, lives in an
// anonymous namespace.
//
// The weight rows are the vector dimension: a packed panel block holds, per group g of four
// consecutive codes, one 512-bit vector for each sixteen rows, as unsigned bytes (code - offset
// is the weight's integer value). vpdpbusd dots such a vector with four int8 activations
// broadcast from the packed activation row (an embedded broadcast, no shuffle), so every weight
// vector loaded feeds kTile activation rows and every activation broadcast feeds the panel's
// rows. The offset is applied exactly by starting each block's int32 sums at -offset x (the
// activation block's sum), and the block's float rescale is one multiply-add per sixteen rows.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul_kernels_impl.h"
#include "backend/cpu/matmul_x86_body.h"
#include "backend/cpu/panel_layout.h"
#include "quant/blocks.h"

namespace ts::cpu {
namespace {

// Two vectors of sixteen weight rows x six activation rows: 12 int32 and 12 float accumulators,
// 2 weight vectors and the temporaries fit the 32 vector registers.
constexpr int kVecRows = 16;
constexpr int kPanelVecs = 2;
static_assert(kVecRows * kPanelVecs == kPanelRows);
constexpr int kTile = 6;
// Blocks per chunk of a panel: a chunk (17-18 KB) stays in L1 while every activation tile passes
// over it.
constexpr int64_t kChunkBlocks = 16;

// One packed block of a panel: codes[g][v] holds codes 4g..4g+3 of rows 16v..16v+15 (row-major
// within the vector: 4 bytes per row), then the rows' f16 scales d and, for the types with a min,
// their f16 mins m. For q8_0 this is the panel layout of panel_layout.h.
constexpr size_t kScaleBytes = kPanelRows * sizeof(uint16_t);

// The rows' float scales in a packed block: f16 d for the 32-element types, MXFP4's e8m0 byte for
// it (2^(e - 128): halved, as its values are doubled; exact, subnormal for e < 2).
template <class Block>
struct PanelScale {
  using T = uint16_t;
  static T of(const Block& b) { return b.d; }
  static __m512 load16(const uint8_t* p) { return _mm512_cvtph_ps(load256(p)); }
};
template <>
struct PanelScale<BlockMXFP4> {
  using T = uint8_t;
  static T of(const BlockMXFP4& b) { return b.e; }
  static __m512 load16(const uint8_t* p) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_scalef_ps(_mm512_set1_ps(1.0f),
                            _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128))));
  }
};
template <class Dec>
using ScaleOf = PanelScale<typename Dec::Block>;

template <class Dec>
constexpr size_t packed_block_bytes() {
  return kPanelCodeBytes + kPanelRows * sizeof(typename ScaleOf<Dec>::T) +
         (Dec::kMin ? kScaleBytes : 0);
}

struct GemmOps {
  static __m256i fifth_bits32(const uint8_t* qh) {
    return _mm256_maskz_mov_epi8(load_u32(qh), bytes(0x10));
  }
};

// Sixteen rows of eight 32-bit words, rows j and j + 8 in the low and high halves of in[j], to
// out[g] lane j = word g of row j (j < 16): an 8 x 8 transpose within each 256-bit half, then
// the halves' 128-bit quarters put in row order by a two-source permute.
inline void transpose16x8(const __m512i* in, __m512i* out) {
  __m512i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {
    const __m512i* p = t + 4 * h;                      // rows 4h..4h+3 (and + 8)
    u[4 * h + 0] = _mm512_unpacklo_epi64(p[0], p[2]);  // words 0 | 4
    u[4 * h + 1] = _mm512_unpackhi_epi64(p[0], p[2]);  // words 1 | 5
    u[4 * h + 2] = _mm512_unpacklo_epi64(p[1], p[3]);  // words 2 | 6
    u[4 * h + 3] = _mm512_unpackhi_epi64(p[1], p[3]);  // words 3 | 7
  }
  // u[g] quarters: (rows 0-3, word g), (rows 0-3, word g + 4), (rows 8-11, g), (rows 8-11, g + 4);
  // u[4 + g] the same for rows 4-7 and 12-15.
  const __m512i low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int g = 0; g < 4; ++g) {
    out[g] = _mm512_permutex2var_epi64(u[g], low, u[4 + g]);
    out[g + 4] = _mm512_permutex2var_epi64(u[g], high, u[4 + g]);
  }
}

// Packs blocks [b0, b1) of weight rows [r, r + valid) of `w` (row layout) into `dst`, one packed
// block after the other (rows past `valid` are zero).
template <class Dec>
void pack_panel(const WeightView& w, int64_t r, int64_t valid, int64_t b0, int64_t b1,
                uint8_t* dst) {
  using Block = typename Dec::Block;
  constexpr size_t stride = packed_block_bytes<Dec>();
  for (int64_t b = b0; b < b1; ++b) {
    uint8_t* out = dst + (b - b0) * stride;
    typename ScaleOf<Dec>::T d[kPanelRows] = {};
    uint16_t m[kPanelRows] = {};
    for (int v = 0; v < kPanelVecs; ++v) {
      __m256i codes[kVecRows];
      for (int j = 0; j < kVecRows; ++j) {
        const int64_t row = v * kVecRows + j;
        if (row >= valid) {
          codes[j] = _mm256_setzero_si256();
          continue;
        }
        const Block& blk = reinterpret_cast<const Block*>(w.data + (r + row) * w.row_stride)[b];
        codes[j] = Dec::template codes<GemmOps>(blk);
        d[row] = ScaleOf<Dec>::of(blk);
        if constexpr (Dec::kMin) m[row] = blk.m;
      }
      __m512i pairs[8], words[8];
      for (int j = 0; j < 8; ++j) {
        pairs[j] = _mm512_inserti64x4(_mm512_castsi256_si512(codes[j]), codes[j + 8], 1);
        // Signed values to unsigned codes (offset 128).
        if constexpr (Dec::kSigned) pairs[j] = _mm512_xor_si512(pairs[j], _mm512_set1_epi8(-128));
      }
      transpose16x8(pairs, words);
      for (int g = 0; g < 8; ++g) _mm512_storeu_si512(out + (g * kPanelVecs + v) * 64, words[g]);
    }
    std::memcpy(out + kPanelCodeBytes, d, sizeof(d));
    if constexpr (Dec::kMin) std::memcpy(out + kPanelCodeBytes + kScaleBytes, m, kScaleBytes);
  }
}

// Prefetches the cache lines that hold [p, p + bytes).
inline void prefetch_span(const void* p, int64_t bytes) {
  const auto first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t line = first; line < end; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
}

// Blocks [b0, b1) of weight rows [row0, row1) (row layout) into L1. A panel regrouped per matmul
// reads its weights from DRAM 32 short row segments at a time: too many streams for the hardware
// prefetchers. So the next chunk is fetched while this one is computed on, a few rows before
// each activation tile: a burst of all its lines at once would overrun the outstanding-miss
// buffers and be dropped.
template <class Dec>
void prefetch_rows(const WeightView& w, int64_t row0, int64_t row1, int64_t b0, int64_t b1) {
  using Block = typename Dec::Block;
  for (int64_t row = row0; row < row1; ++row) {
    const auto* blocks = reinterpret_cast<const Block*>(w.data + row * w.row_stride);
    prefetch_span(blocks + b0, (b1 - b0) * static_cast<int64_t>(sizeof(Block)));
  }
}

// The masks of a panel's vectors when only its first `valid` rows exist.
inline void panel_masks(int64_t valid, __mmask16 (&mask)[kPanelVecs]) {
  for (int v = 0; v < kPanelVecs; ++v) {
    const int64_t n = std::clamp<int64_t>(valid - v * kVecRows, 0, kVecRows);
    mask[v] = static_cast<__mmask16>((1u << n) - 1);
  }
}

// What to prefetch while blocks [b0, b1) of the panel at row r (of rows [.., r1)) are computed
// on: the next blocks of this panel, or the next panel's first, chunk_blocks of them.
struct NextChunk {
  int64_t row0, row1, b0, b1;
};
inline NextChunk next_chunk(int64_t r, int64_t r1, int64_t b1, int64_t nb, int64_t chunk_blocks) {
  if (b1 < nb) return {r, std::min(r1, r + kPanelRows), b1, std::min(nb, b1 + chunk_blocks)};
  const int64_t next = r + kPanelRows;
  return {next, std::min(r1, next + kPanelRows), 0, std::min(nb, chunk_blocks)};
}

// Part i of `parts` of the next chunk's rows, prefetched (one part before each activation tile).
template <class Dec>
void prefetch_share(const WeightView& w, const NextChunk& next, int64_t i, int64_t parts) {
  if (next.row0 >= next.row1) return;
  const int64_t n = next.row1 - next.row0;
  prefetch_rows<Dec>(w, next.row0 + n * i / parts, next.row0 + n * (i + 1) / parts, next.b0,
                     next.b1);
}

// Sixteen f16 values at p as floats.
inline __m512 load_f16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(load256(p));
}

// Moves bit `from` of every byte to bit `to` (other bits garbage; the caller masks).
inline __m512i move_bit512(__m512i v, int from, int to) {
  return from <= to ? _mm512_slli_epi16(v, to - from) : _mm512_srli_epi16(v, from - to);
}

// A table's values + 128 (vpdpbusd's unsigned operand; kIq4Levels, kMxfp4Doubled) in every
// 128-bit lane: a byte shuffle by the codes gives the GEMM's unsigned codes.
inline __m512i unsigned_table512(const int8_t (&table)[16]) {
  return _mm512_xor_si512(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table))),
      _mm512_set1_epi8(-128));
}
inline __m512i iq4_unsigned_levels512() {
  return unsigned_table512(kIq4Levels);
}

// y rows m0..m0+T-1, columns [r, r + 16 kPanelVecs) (masked) += the packed blocks [b0, b1) at
// `panel` (block b0 first) dotted with the activations; `first` starts from zero. starts[m * nb +
// b] is -offset x the sum of activation row m's block b.
template <class Dec, int T>
void micro(const uint8_t* panel, const PackedActs& x, const int32_t* starts, int64_t m0, int64_t b0,
           int64_t b1, float* y, int64_t ldy, int64_t r, const __mmask16 mask[kPanelVecs],
           bool first) {
  constexpr size_t stride = packed_block_bytes<Dec>();
  const int64_t nb = x.K / kQK32;
  const BlockQ8A32* xs[T];
  for (int t = 0; t < T; ++t)
    xs[t] = reinterpret_cast<const BlockQ8A32*>(x.data.data() + (m0 + t) * x.row_bytes);
  __m512 acc[kPanelVecs][T];
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < kPanelVecs; ++v)
      acc[v][t] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(mask[v], y + (m0 + t) * ldy + r + v * kVecRows);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* pb = panel + (b - b0) * stride;
    __m512i isum[kPanelVecs][T];
    for (int t = 0; t < T; ++t) {
      const __m512i start = _mm512_set1_epi32(starts[(m0 + t) * nb + b]);
      for (int v = 0; v < kPanelVecs; ++v) isum[v][t] = start;
    }
    for (int g = 0; g < 8; ++g) {
      __m512i wv[kPanelVecs];
      for (int v = 0; v < kPanelVecs; ++v)
        wv[v] = _mm512_loadu_si512(pb + (g * kPanelVecs + v) * 64);
      for (int t = 0; t < T; ++t) {
        const __m512i xv = _mm512_set1_epi32(
            static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(xs[t][b].qs) + 4 * g)));
        for (int v = 0; v < kPanelVecs; ++v)
          isum[v][t] = _mm512_dpbusd_epi32(isum[v][t], wv[v], xv);
      }
    }
    const uint8_t* scales = pb + kPanelCodeBytes;
    for (int v = 0; v < kPanelVecs; ++v) {
      const __m512 dv =
          ScaleOf<Dec>::load16(scales + v * kVecRows * sizeof(typename ScaleOf<Dec>::T));
      for (int t = 0; t < T; ++t) {
        const __m512 scale = _mm512_mul_ps(dv, _mm512_set1_ps(xs[t][b].d));
        acc[v][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[v][t]), scale, acc[v][t]);
      }
      if constexpr (Dec::kMin) {
        const __m512 mv = load_f16x16(scales + kScaleBytes + v * kVecRows * sizeof(uint16_t));
        for (int t = 0; t < T; ++t)
          acc[v][t] = _mm512_fmadd_ps(
              mv, _mm512_set1_ps(xs[t][b].d * static_cast<float>(xs[t][b].sum)), acc[v][t]);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < kPanelVecs; ++v)
      _mm512_mask_storeu_ps(y + (m0 + t) * ldy + r + v * kVecRows, mask[v], acc[v][t]);
}

// The loop the one-row GEMVs over packed panels share: for each panel of rows [r0, r1) and each
// of its blocks (`block_elems` weights a row, `block_bytes` apart), sums(blk, xb, itot, mtot)
// gives the block's exact int32 sums for the panel's two vectors of sixteen rows against
// activation block xb (mtot: the min term, types with mins); then the GEMM's float rescale, d
// (and dmin) at blk + d_at (dmin_at) times the activation block's scale, the same operations in
// the same order as the micro-kernels, so the GEMV gives the GEMM's bits.
template <class Act, bool kMin, class Sums>
void panel_gemv(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                int64_t block_elems, size_t block_bytes, size_t d_at, size_t dmin_at,
                const Sums& sums) {
  const int64_t nb = x.K / block_elems;
  const auto* xb = reinterpret_cast<const Act*>(x.data.data());
  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const uint8_t* panel = w.data + r * w.row_stride;
    __m512 acc[kPanelVecs] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = panel + b * block_bytes;
      __m512i itot[kPanelVecs], mtot[kPanelVecs];
      sums(blk, xb[b], itot, mtot);
      const __m512 xd = _mm512_set1_ps(xb[b].d);
      for (int v = 0; v < kPanelVecs; ++v) {
        const size_t halves = v * kVecRows * sizeof(uint16_t);
        acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(itot[v]),
                                 _mm512_mul_ps(load_f16x16(blk + d_at + halves), xd), acc[v]);
        if constexpr (kMin)
          acc[v] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mtot[v]),
                                    _mm512_mul_ps(load_f16x16(blk + dmin_at + halves), xd), acc[v]);
      }
    }
    for (int v = 0; v < kPanelVecs; ++v) _mm512_storeu_ps(y + r + v * kVecRows, acc[v]);
  }
}

// Calls tile.template operator()<T>() for T = min(rows, kTile): the micro-kernels' register tiles
// are compile-time.
template <int T = kTile, class Tile>
void with_tile_rows(int rows, const Tile& tile) {
  if constexpr (T > 1) {
    if (rows < T) return with_tile_rows<T - 1>(rows, tile);
  }
  tile.template operator()<T>();
}

// The loop every GEMM here shares: for each panel of rows [r0, r1) and chunk of `chunk` of its nb
// blocks, layout(r, valid, b0, b1) gives the chunk as the micro-kernel reads it (regrouped into a
// buffer, or where it lies); then for each tile of kTile activation rows, prefetch(next, i,
// tiles) fetches part i of the next chunk and tile.template operator()<T>(chunk, m0, b0, b1, r,
// mask, first) runs the T-row micro-kernel (`first`: the panel's first chunk, sums start at 0).
template <class Layout, class Prefetch, class Tile>
void panel_gemm(int64_t r0, int64_t r1, int64_t nb, int64_t M, int64_t chunk, const Layout& layout,
                const Prefetch& prefetch, const Tile& tile) {
  const int64_t tiles = (M + kTile - 1) / kTile;
  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const int64_t valid = std::min(kPanelRows, r1 - r);
    __mmask16 mask[kPanelVecs];
    panel_masks(valid, mask);
    for (int64_t b0 = 0; b0 < nb; b0 += chunk) {
      const int64_t b1 = std::min(nb, b0 + chunk);
      const NextChunk next = next_chunk(r, r1, b1, nb, chunk);
      const uint8_t* data = layout(r, valid, b0, b1);
      for (int64_t i = 0; i < tiles; ++i) {
        prefetch(next, i, tiles);
        const int64_t m0 = i * kTile;
        with_tile_rows(static_cast<int>(std::min<int64_t>(kTile, M - m0)), [&]<int T>() {
          tile.template operator()<T>(data, m0, b0, b1, r, mask, b0 == 0);
        });
      }
    }
  }
}

// Part i of `parts` of the next chunk of a weight packed at load, whose chunks are contiguous
// runs of `block_bytes` per block.
inline void prefetch_packed_chunk(const WeightView& w, const NextChunk& next, int64_t i,
                                  int64_t parts, size_t block_bytes) {
  if (next.row0 >= next.row1) return;
  const uint8_t* start = w.data + next.row0 * w.row_stride + next.b0 * block_bytes;
  const int64_t bytes = (next.b1 - next.b0) * static_cast<int64_t>(block_bytes);
  prefetch_span(start + bytes * i / parts, bytes * (i + 1) / parts - bytes * i / parts);
}

// Packs panels [p0, p1) of a weight in place: each panel's rows are copied out (its packed bytes
// overwrite them), then pack_one(rows, panel) writes the panel.
template <class PackOne>
void pack_in_place(uint8_t* data, size_t row_stride, int64_t p0, int64_t p1,
                   const PackOne& pack_one) {
  std::vector<uint8_t> rows(static_cast<size_t>(kPanelRows) * row_stride);
  for (int64_t p = p0; p < p1; ++p) {
    uint8_t* panel = data + p * kPanelRows * row_stride;
    std::memcpy(rows.data(), panel, rows.size());
    pack_one(rows.data(), panel);
  }
}

// Where each block's int32 sums start: -offset x (the activation block's sum), as a table
// [M][blocks], so that the kernel starts them with a broadcast load rather than arithmetic on
// every block.
template <class Dec>
void block_starts(const PackedActs& x, std::vector<int32_t>& starts) {
  const int64_t nb = x.K / kQK32;
  starts.resize(static_cast<size_t>(x.M * nb));
  for (int64_t m = 0; m < x.M; ++m) {
    const auto* xb = reinterpret_cast<const BlockQ8A32*>(x.data.data() + m * x.row_bytes);
    for (int64_t b = 0; b < nb; ++b)
      starts[static_cast<size_t>(m * nb + b)] = -Dec::kOffset * xb[b].sum;
  }
}

}  // namespace
}  // namespace ts::cpu
