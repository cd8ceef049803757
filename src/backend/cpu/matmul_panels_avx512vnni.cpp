// Kernels over q8_0 weights in the panel layout (panel_layout.h) on AVX512-VNNI: the in-place
// packer run at load, the prefill GEMM (gemm_vnni_body.h) reading the packed blocks where they
// lie, and the decode GEMV. Packed once, a weight is read as one stream per panel by both: the
// GEMM no longer regroups the rows per micro-batch, and the GEMV no longer reads 32 short row
// segments at a time. The GEMV computes each output exactly as the GEMM does (same int32 sums,
// same float operations in the same block order), so prefill and decode give the same bits.
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

namespace ts::cpu {
namespace {

static_assert(packed_block_bytes<DecQ8_0>() == kPanelBlockBytes);

void gemm_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t ldy) {
  const int64_t nb = x.K / kQK32;
  thread_local std::vector<int32_t> starts;
  block_starts<DecQ8_0>(x, starts);
  const __mmask16 mask[kPanelVecs] = {0xFFFF, 0xFFFF};
  const int64_t tiles = (x.M + kTile - 1) / kTile;
  const uint8_t* end = w.data + r1 * w.row_stride;
  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const uint8_t* panel = w.data + r * w.row_stride;
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
      const int64_t b1 = std::min(nb, b0 + kChunkBlocks);
      const uint8_t* chunk = panel + b0 * kPanelBlockBytes;
      // The next chunk (of this panel, or the next panel's first) follows this one in memory. It
      // is fetched while this one is computed on, a part before each activation tile: a burst of
      // all its lines at once would overrun the outstanding-miss buffers and be dropped.
      const uint8_t* next = chunk + (b1 - b0) * kPanelBlockBytes;
      const int64_t lines =
          (std::min<int64_t>(kChunkBlocks * kPanelBlockBytes, end - next) + 63) / 64;
      for (int64_t i = 0; i < tiles; ++i) {
        const int64_t l0 = lines * i / tiles, l1 = lines * (i + 1) / tiles;
        prefetch_span(next + 64 * l0, 64 * (l1 - l0));
        const int64_t m0 = i * kTile;
        const int rows = static_cast<int>(std::min<int64_t>(kTile, x.M - m0));
        micro_rows<DecQ8_0>(rows, chunk, x, starts.data(), m0, b0, b1, y, ldy, r, mask, b0 == 0);
      }
    }
  }
}

// One activation row: per panel, the 32 rows' int32 sums of each block in four accumulators
// (two per sixteen rows, even and odd code groups, so that the dependency chains are short),
// then the block's float rescale as in micro().
void gemv_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t) {
  const int64_t nb = x.K / kQK32;
  const auto* xb = reinterpret_cast<const BlockQ8A32*>(x.data.data());
  for (int64_t r = r0; r < r1; r += kPanelRows) {
    const uint8_t* pb = w.data + r * w.row_stride;
    __m512 acc[kPanelVecs] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; ++b, pb += kPanelBlockBytes) {
      const auto* xq = reinterpret_cast<const uint8_t*>(xb[b].qs);
      const __m512i start = _mm512_set1_epi32(-DecQ8_0::kOffset * xb[b].sum);
      __m512i even[kPanelVecs] = {start, start};
      __m512i odd[kPanelVecs] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      for (int g = 0; g < 8; g += 2) {
        const __m512i x0 = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 4 * g)));
        const __m512i x1 = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 4 * g + 4)));
        for (int v = 0; v < kPanelVecs; ++v) {
          even[v] =
              _mm512_dpbusd_epi32(even[v], _mm512_loadu_si512(pb + (g * kPanelVecs + v) * 64), x0);
          odd[v] = _mm512_dpbusd_epi32(
              odd[v], _mm512_loadu_si512(pb + ((g + 1) * kPanelVecs + v) * 64), x1);
        }
      }
      const __m512 xd = _mm512_set1_ps(xb[b].d);
      for (int v = 0; v < kPanelVecs; ++v) {
        const __m512 scale =
            _mm512_mul_ps(load_f16x16(pb + kPanelCodeBytes + v * kVecRows * sizeof(uint16_t)), xd);
        acc[v] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even[v], odd[v])), scale, acc[v]);
      }
    }
    for (int v = 0; v < kPanelVecs; ++v) _mm512_storeu_ps(y + r + v * kVecRows, acc[v]);
  }
}

}  // namespace

RowsKernel avx512vnni_panel_kernel(int64_t M) {
  return M == 1 ? gemv_panels : gemm_panels;
}

void avx512vnni_pack_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                            int64_t p1) {
  // A panel's packed bytes overwrite its rows: the rows are copied out first.
  std::vector<uint8_t> rows(static_cast<size_t>(kPanelRows) * row_stride);
  const WeightView copy{DType::Q8_0, rows.data(), kPanelRows, cols, row_stride};
  for (int64_t p = p0; p < p1; ++p) {
    uint8_t* panel = data + p * kPanelRows * row_stride;
    std::memcpy(rows.data(), panel, rows.size());
    pack_panel<DecQ8_0>(copy, 0, kPanelRows, 0, cols / kQK32, panel);
  }
}

}  // namespace ts::cpu

TS_ISA_END()
