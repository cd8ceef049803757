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

// The GEMM reads each chunk where it lies: a panel's blocks are contiguous, and so are the panels.
void gemm_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t ldy) {
  thread_local std::vector<int32_t> starts;
  block_starts<DecQ8_0>(x, starts);
  panel_gemm(
      r0, r1, x.K / kQK32, x.M, kChunkBlocks,
      [&](int64_t r, int64_t, int64_t b0, int64_t) {
        return w.data + r * w.row_stride + b0 * kPanelBlockBytes;
      },
      [&](const NextChunk& next, int64_t i, int64_t tiles) {
        prefetch_packed_chunk(w, next, i, tiles, kPanelBlockBytes);
      },
      [&]<int T>(const uint8_t* chunk, int64_t m0, int64_t b0, int64_t b1, int64_t r,
                 const __mmask16* mask, bool first) {
        micro<DecQ8_0, T>(chunk, x, starts.data(), m0, b0, b1, y, ldy, r, mask, first);
      });
}

// One activation row: per panel, the 32 rows' int32 sums of each block in four accumulators
// (two per sixteen rows, even and odd code groups, so that the dependency chains are short),
// then the block's float rescale as in micro().
void gemv_panels(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t) {
  panel_gemv<BlockQ8A32, false>(
      w, x, r0, r1, y, kQK32, kPanelBlockBytes, kPanelCodeBytes, 0,
      [](const uint8_t* pb, const BlockQ8A32& xb, __m512i(&itot)[kPanelVecs],
         __m512i(&)[kPanelVecs]) {
        const auto* xq = reinterpret_cast<const uint8_t*>(xb.qs);
        const __m512i start = _mm512_set1_epi32(-DecQ8_0::kOffset * xb.sum);
        __m512i even[kPanelVecs] = {start, start};
        __m512i odd[kPanelVecs] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int g = 0; g < 8; g += 2) {
          const __m512i x0 = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 4 * g)));
          const __m512i x1 = _mm512_set1_epi32(static_cast<int>(load_u32(xq + 4 * g + 4)));
          for (int v = 0; v < kPanelVecs; ++v) {
            even[v] = _mm512_dpbusd_epi32(even[v],
                                          _mm512_loadu_si512(pb + (g * kPanelVecs + v) * 64), x0);
            odd[v] = _mm512_dpbusd_epi32(
                odd[v], _mm512_loadu_si512(pb + ((g + 1) * kPanelVecs + v) * 64), x1);
          }
        }
        for (int v = 0; v < kPanelVecs; ++v) itot[v] = _mm512_add_epi32(even[v], odd[v]);
      });
}

}  // namespace

RowsKernel avx512vnni_panel_kernel(int64_t M) {
  return M == 1 ? gemv_panels : gemm_panels;
}

void avx512vnni_pack_panels(uint8_t* data, int64_t cols, size_t row_stride, int64_t p0,
                            int64_t p1) {
  pack_in_place(data, row_stride, p0, p1, [&](const uint8_t* rows, uint8_t* panel) {
    const WeightView copy{DType::Q8_0, rows, kPanelRows, cols, row_stride};
    pack_panel<DecQ8_0>(copy, 0, kPanelRows, 0, cols / kQK32, panel);
  });
}

}  // namespace ts::cpu

TS_ISA_END()
