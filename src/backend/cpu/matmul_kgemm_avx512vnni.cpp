// Prefill (M >= kGemmMinRows) kernel for the k-quants (q2_k ... q6_k, iq4_xs; the low-bit types
// through their decoders, matmul_lowbit_x86_body.h) in the row layout on
// AVX512-VNNI: the GEMM of kgemm_vnni_body.h, each panel of kPanelRows weight rows decoded from
// the rows per chunk of super-blocks (a decode per weight per matmul, shared by all activation
// rows: a modest share of a short prompt's matmul time, docs/PERFORMANCE.md, "Measured choices").
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"
#include "quant/iq_grids.h"

TS_ISA_BEGIN("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

#include "backend/cpu/gemm_vnni_body.h"
#include "backend/cpu/kgemm_vnni_body.h"
#include "backend/cpu/matmul_lowbit_x86_body.h"

namespace ts::cpu {
namespace {

// Packs super-blocks [b0, b1) of weight rows [r, r + valid) of `w` into `dst` (rows past `valid`
// are zero).
template <class Dec>
void kpack_panel(const WeightView& w, int64_t r, int64_t valid, int64_t b0, int64_t b1,
                 uint8_t* dst) {
  using Block = typename Dec::Block;
  using P = KPacked<Dec>;
  const int64_t nb = w.cols / kQKK;
  for (int64_t b = b0; b < b1; ++b) {
    uint8_t* out = dst + (b - b0) * P::kBytes;
    auto* scale = reinterpret_cast<int32_t*>(out + P::kScales);
    auto* mins = reinterpret_cast<int32_t*>(out + P::kMins);
    auto* d = reinterpret_cast<float*>(out + P::kD);
    auto* dmin = reinterpret_cast<float*>(out + P::kDmin);
    for (int v = 0; v < kPanelVecs; ++v) {
      KDecoded k[kVecRows];  // not zeroed as a whole: that memset showed in the packing's time
      for (int j = 0; j < kVecRows; ++j) {
        const int64_t row = v * kVecRows + j;
        if (row >= valid) {
          k[j] = KDecoded{};
        } else {
          const auto* blocks = reinterpret_cast<const Block*>(w.data + (r + row) * w.row_stride);
          // The row's block one chunk ahead: 32 row streams are too many for the hardware
          // prefetchers, and with few activation rows the kernel waited on memory here.
          if (b + kChunkSupers < nb) prefetch_span(&blocks[b + kChunkSupers], sizeof(Block));
          Dec::decode(blocks[b], k[j]);
        }
        int16_t s16[16];
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(s16), k[j].scale16);
        for (int s = 0; s < P::kSubs; ++s)
          scale[s * kPanelRows + row] = s16[s * sub_elems<Dec>() / 16];
        if constexpr (Dec::kMin) {
          int32_t m32[8];
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(m32), k[j].min16);
          for (int p = 0; p < P::kMinPairs; ++p) mins[p * kPanelRows + row] = m32[p];
        }
        d[row] = k[j].d;
        dmin[row] = k[j].dmin;
      }
      // Chunk c of the decoded rows holds their codes 32c .. 32c + 31: code groups 8c .. 8c + 7.
      for (int c = 0; c < 8; ++c) {
        __m512i words[8];
        chunk_groups(k, c, words);
        for (int g = 0; g < 8; ++g) {
          if constexpr (Dec::kSigned) words[g] = _mm512_xor_si512(words[g], _mm512_set1_epi8(-128));
          _mm512_storeu_si512(out + P::kCodes + ((8 * c + g) * kPanelVecs + v) * 64, words[g]);
        }
      }
    }
  }
}

template <class Dec>
struct RowSource {
  const WeightView& w;
  void pack(int64_t r, int64_t valid, int64_t b0, int64_t b1, uint8_t* dst) const {
    kpack_panel<Dec>(w, r, valid, b0, b1, dst);
  }
  void prefetch(const NextChunk& next, int64_t i, int64_t tiles) const {
    prefetch_share<Dec>(w, next, i, tiles);
  }
};

template <class Dec>
void kgemm_rows(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                int64_t ldy) {
  kgemm<Dec>(RowSource<Dec>{w}, x, r0, r1, y, ldy);
}

}  // namespace

RowsKernel avx512vnni_kgemm_kernel(DType t) {
  switch (t) {
    case DType::Q2_K:
      return kgemm_rows<DecQ2_K>;
    case DType::Q3_K:
      return kgemm_rows<DecQ3_K>;
    case DType::Q4_K:
      return kgemm_rows<DecQ4_K>;
    case DType::Q5_K:
      return kgemm_rows<DecQ5_K>;
    case DType::Q6_K:
      return kgemm_rows<DecQ6_K>;
    case DType::IQ4_XS:
      return kgemm_rows<DecIQ4_XS>;
    case DType::IQ2_XXS:
      return kgemm_rows<LowbitIQ2_XXS>;
    case DType::IQ2_XS:
      return kgemm_rows<LowbitIQ2_XS>;
    case DType::IQ2_S:
      return kgemm_rows<LowbitIQ2_S>;
    case DType::IQ3_XXS:
      return kgemm_rows<LowbitIQ3_XXS>;
    case DType::IQ3_S:
      return kgemm_rows<LowbitIQ3_S>;
    case DType::IQ1_S:
      return kgemm_rows<LowbitIQ1_S>;
    case DType::IQ1_M:
      return kgemm_rows<LowbitIQ1_M>;
    case DType::TQ1_0:
      return kgemm_rows<LowbitTQ1_0>;
    case DType::TQ2_0:
      return kgemm_rows<LowbitTQ2_0>;
    default:
      return nullptr;
  }
}

}  // namespace ts::cpu

TS_ISA_END()
