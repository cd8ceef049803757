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

template <class Dec>
void gemm_rows(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
               int64_t ldy) {
  // One buffer per thread, grown to the largest chunk once and kept.
  thread_local std::vector<uint8_t> panel;
  panel.resize(kChunkBlocks * packed_block_bytes<Dec>());
  thread_local std::vector<int32_t> starts;
  block_starts<Dec>(x, starts);
  panel_gemm(
      r0, r1, x.K / kQK32, x.M, kChunkBlocks,
      [&](int64_t r, int64_t valid, int64_t b0, int64_t b1) {
        pack_panel<Dec>(w, r, valid, b0, b1, panel.data());
        return static_cast<const uint8_t*>(panel.data());
      },
      [&](const NextChunk& next, int64_t i, int64_t tiles) {
        prefetch_share<Dec>(w, next, i, tiles);
      },
      [&]<int T>(const uint8_t* chunk, int64_t m0, int64_t b0, int64_t b1, int64_t r,
                 const __mmask16* mask, bool first) {
        micro<Dec, T>(chunk, x, starts.data(), m0, b0, b1, y, ldy, r, mask, first);
      });
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
    case DType::IQ4_NL:
      return gemm_rows<DecIQ4_NL>;
    case DType::MXFP4:
      return gemm_rows<DecMXFP4>;
    default:
      return nullptr;
  }
}

}  // namespace ts::cpu

TS_ISA_END()
