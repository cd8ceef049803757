// Prefill (M > 1) kernel for the 32-element block types in the row layout on AVX512-VNNI: the
// register-blocked GEMM of gemm_vnni_body.h, with each panel of kPanelRows weight rows regrouped
// (per chunk of kChunkBlocks blocks, into L1) as the kernel reads them. The regrouping costs a
// transpose per weight block, paid once per matmul and shared by all activation rows, which is
// why this path is taken only from kGemmMinRows rows up. q8_0 weights packed at load
// (panel_layout.h) skip it: matmul_panels_avx512vnni.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"

TS_ISA_BEGIN("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

#include "backend/cpu/gemm_vnni_body.h"

namespace ts::cpu {
namespace {

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

template <class Dec>
void gemm_rows(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
               int64_t ldy) {
  // One buffer per thread, grown to the largest chunk once and kept.
  thread_local std::vector<uint8_t> panel;
  panel.resize(kChunkBlocks * packed_block_bytes<Dec>());
  const int64_t nb = x.K / kQK32;
  thread_local std::vector<int32_t> starts;
  block_starts<Dec>(x, starts);
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

TS_ISA_END()
