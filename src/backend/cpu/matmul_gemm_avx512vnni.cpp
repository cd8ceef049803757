// Prefill (M > 1) kernel for the 32-element block types on AVX512-VNNI: a register-blocked GEMM.
//
// The weight rows are the vector dimension: a panel of kPanelRows rows is repacked (per chunk of
// kChunkBlocks blocks, into L1) so that one 512-bit vector holds four consecutive codes of
// sixteen rows, as unsigned bytes (code - offset is the weight's integer value). vpdpbusd then
// dots such a vector with four int8 activations broadcast from the packed activation row (an
// embedded broadcast, no shuffle), so every weight vector loaded feeds kTile activation rows and
// every activation broadcast feeds the panel's rows. The offset is applied exactly by starting
// each block's int32 sums at -offset x (the activation block's sum), and the block's float
// rescale is one multiply-add per sixteen rows. The repacking costs a transpose per weight block,
// paid once per matmul and shared by all activation rows, which is why this path is taken only
// from kGemmMinRows rows up.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"

#if defined(__clang__)
#pragma clang attribute push(                                                      \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized flags
// (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "backend/cpu/matmul_x86_body.h"

namespace ts::cpu {
namespace {

// Two vectors of sixteen weight rows x six activation rows: 12 int32 and 12 float accumulators,
// 2 weight vectors and the temporaries fit the 32 vector registers.
constexpr int kVecRows = 16;
constexpr int kPanelVecs = 2;
constexpr int64_t kPanelRows = kVecRows * kPanelVecs;
constexpr int kTile = 6;
// A chunk of the panel (1152 or 1280 bytes per block) stays in L1 while every activation tile
// passes over it.
constexpr int64_t kChunkBlocks = 16;

// One packed block of a panel: codes[g][v] holds codes 4g..4g+3 of rows 16v..16v+15 (row-major
// within the vector: 4 bytes per row), then the rows' scales d and, for the types with a min, m.
constexpr size_t kCodesBytes = 8 * kPanelVecs * 64;
constexpr size_t kScaleBytes = kPanelRows * sizeof(float);

template <class Dec>
constexpr size_t packed_block_bytes() {
  return kCodesBytes + (Dec::kMin ? 2 : 1) * kScaleBytes;
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

// Packs blocks [b0, b1) of weight rows [r, r + valid) into `dst` (rows past `valid` are zero).
template <class Dec>
void pack_panel(const WeightView& w, int64_t r, int64_t valid, int64_t b0, int64_t b1,
                uint8_t* dst) {
  using Block = typename Dec::Block;
  constexpr size_t stride = packed_block_bytes<Dec>();
  // The f16 scales are collected for the whole chunk and converted sixteen at a time at the end:
  // a vector load of scales just stored one by one cannot be forwarded from the store buffer and
  // stalls, and one scalar conversion per row made a dependency chain through the register it
  // merges into.
  alignas(64) uint16_t dh[kChunkBlocks][kPanelRows] = {}, mh[kChunkBlocks][kPanelRows] = {};
  for (int64_t b = b0; b < b1; ++b) {
    uint8_t* out = dst + (b - b0) * stride;
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
        dh[b - b0][row] = blk.d;
        if constexpr (Dec::kMin) mh[b - b0][row] = blk.m;
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
  }
  for (int64_t b = b0; b < b1; ++b) {
    auto* d = reinterpret_cast<float*>(dst + (b - b0) * stride + kCodesBytes);
    for (int v = 0; v < kPanelVecs; ++v) {
      _mm512_storeu_ps(d + v * kVecRows, _mm512_cvtph_ps(load256(&dh[b - b0][v * kVecRows])));
      if constexpr (Dec::kMin)
        _mm512_storeu_ps(d + kPanelRows + v * kVecRows,
                         _mm512_cvtph_ps(load256(&mh[b - b0][v * kVecRows])));
    }
  }
}

// The panel's weights come from DRAM, 32 short row segments at a time: too many streams for the
// hardware prefetchers. So the next chunk is fetched (into L2) while this one is computed on,
// a few rows before each activation tile: a burst of all its lines at once would overrun the
// outstanding-miss buffers and be dropped.
template <class Dec>
void prefetch_rows(const WeightView& w, int64_t row0, int64_t row1, int64_t b0, int64_t b1) {
  using Block = typename Dec::Block;
  for (int64_t row = row0; row < row1; ++row) {
    const auto* blocks = reinterpret_cast<const Block*>(w.data + row * w.row_stride);
    const auto* p = reinterpret_cast<const char*>(blocks + b0);
    const auto* end = reinterpret_cast<const char*>(blocks + b1);
    for (; p < end; p += 64) _mm_prefetch(p, _MM_HINT_T0);
  }
}

// y rows m0..m0+T-1, columns [r, r + 16 kPanelVecs) (masked to `valid`) += the panel chunk
// (blocks [b0, b1), packed at `panel`) dotted with the activations; `first` starts from zero.
template <class Dec, int T>
void micro(const uint8_t* panel, const PackedActs& x, const int32_t* starts, int64_t m0, int64_t b0,
           int64_t b1, float* y, int64_t ldy, int64_t r, __mmask16 mask[kPanelVecs], bool first) {
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
    const auto* d = reinterpret_cast<const float*>(pb + kCodesBytes);
    for (int v = 0; v < kPanelVecs; ++v) {
      const __m512 dv = _mm512_loadu_ps(d + v * kVecRows);
      for (int t = 0; t < T; ++t) {
        const __m512 scale = _mm512_mul_ps(dv, _mm512_set1_ps(xs[t][b].d));
        acc[v][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[v][t]), scale, acc[v][t]);
      }
      if constexpr (Dec::kMin) {
        const __m512 mv = _mm512_loadu_ps(d + kPanelRows + v * kVecRows);
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

template <class Dec, int T = kTile>
void micro_rows(int rows, const uint8_t* panel, const PackedActs& x, const int32_t* starts,
                int64_t m0, int64_t b0, int64_t b1, float* y, int64_t ldy, int64_t r,
                __mmask16 mask[kPanelVecs], bool first) {
  if constexpr (T > 1) {
    if (rows < T)
      return micro_rows<Dec, T - 1>(rows, panel, x, starts, m0, b0, b1, y, ldy, r, mask, first);
  }
  micro<Dec, T>(panel, x, starts, m0, b0, b1, y, ldy, r, mask, first);
}

template <class Dec>
void gemm_rows(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
               int64_t ldy) {
  // One buffer per thread, grown to the largest chunk once and kept.
  thread_local std::vector<uint8_t> panel;
  panel.resize(kChunkBlocks * packed_block_bytes<Dec>());
  const int64_t nb = x.K / kQK32;
  // Where each block's int32 sums start: -offset x (the activation block's sum), as a table, so
  // that the kernel starts them with a broadcast load rather than arithmetic on every block.
  thread_local std::vector<int32_t> starts;
  starts.resize(static_cast<size_t>(x.M * nb));
  for (int64_t m = 0; m < x.M; ++m) {
    const auto* xb = reinterpret_cast<const BlockQ8A32*>(x.data.data() + m * x.row_bytes);
    for (int64_t b = 0; b < nb; ++b)
      starts[static_cast<size_t>(m * nb + b)] = -Dec::kOffset * xb[b].sum;
  }
  const int64_t tiles = (x.M + kTile - 1) / kTile;
  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const int64_t valid = std::min(kPanelRows, r1 - r);
    __mmask16 mask[kPanelVecs];
    for (int v = 0; v < kPanelVecs; ++v) {
      const int64_t n = std::clamp<int64_t>(valid - v * kVecRows, 0, kVecRows);
      mask[v] = static_cast<__mmask16>((1u << n) - 1);
    }
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
      const int64_t b1 = std::min(nb, b0 + kChunkBlocks);
      // The chunk after this one: the next blocks of this panel, or the next panel's first.
      const bool last = b1 == nb;
      const int64_t pr = last ? r + kPanelRows : r;
      const int64_t pr_end = last ? std::min(r1, pr + kPanelRows) : r + valid;
      const int64_t pb0 = last ? 0 : b1,
                    pb1 = last ? std::min(nb, kChunkBlocks) : std::min(nb, b1 + kChunkBlocks);
      pack_panel<Dec>(w, r, valid, b0, b1, panel.data());
      for (int64_t i = 0; i < tiles; ++i) {
        const int64_t m0 = i * kTile;
        if (pr < pr_end)
          prefetch_rows<Dec>(w, pr + (pr_end - pr) * i / tiles,
                             pr + (pr_end - pr) * (i + 1) / tiles, pb0, pb1);
        const int rows = static_cast<int>(std::min<int64_t>(kTile, x.M - m0));
        micro_rows<Dec>(rows, panel.data(), x, starts.data(), m0, b0, b1, y, ldy, r, mask, b0 == 0);
      }
    }
  }
}

}  // namespace

RowsKernel avx512vnni_gemm_kernel(DType t) {
  switch (t) {
    case DType::Q4_0:
      return gemm_rows<DecQ4_0>;
    case DType::Q4_1:
      return gemm_rows<DecQ4_1>;
    case DType::Q5_0:
      return gemm_rows<DecQ5_0>;
    case DType::Q5_1:
      return gemm_rows<DecQ5_1>;
    case DType::Q8_0:
      return gemm_rows<DecQ8_0>;
    default:
      return nullptr;
  }
}

}  // namespace ts::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
