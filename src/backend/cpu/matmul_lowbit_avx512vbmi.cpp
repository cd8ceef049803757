// iq3_xxs on AVX512-VBMI: its 256-entry grid held in registers as 16-bit codes (a value's level in
// 3 bits), 32 indices looked up at once by word permutes, and each entry's codes spread into bytes
// by vpmultishiftqb and a level shuffle, where matmul_lowbit_avx512_body.h's decoder loads and
// inserts sixteen 4-byte entries a chunk pair (the pairs, their signs and scales are its). The
// 8-value grids gain nothing so: their scalar assembly is half the loads a value, and iq2_xxs
// measured slower this way. Own file: only a CPU with VBMI (matmul_kernels.cpp asks) meets it.
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/isa_target.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"
#include "quant/iq_grids.h"

TS_ISA_BEGIN("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")

#include "backend/cpu/matmul_lowbit_avx512_body.h"
#include "backend/cpu/matmul_lowbit_x86_body.h"
#include "backend/cpu/matmul_vnni_ops.h"
#include "backend/cpu/matmul_x86_body.h"

namespace ts::cpu {
namespace {

// iq3_xxs's grid values, ascending (a 16-byte shuffle table: the codes index its first eight).
alignas(16) constexpr uint8_t kIq3xxsLevels[16] = {4, 12, 20, 28, 36, 44, 52, 62};

// The grid as 16-bit codes: value k of entry e is level (code >> 3 k) & 7.
struct GridCodes {
  alignas(64) uint16_t code[256];
};

constexpr GridCodes iq3xxs_codes() {
  GridCodes c{};
  for (int e = 0; e < 256; ++e) {
    uint32_t code = 0;
    for (int k = 0; k < 4; ++k) {
      const auto v = static_cast<uint8_t>(kIq3xxsGrid[e] >> (8 * k));
      uint32_t level = 0;
      while (kIq3xxsLevels[level] != v) ++level;
      code |= level << (3 * k);
    }
    c.code[e] = static_cast<uint16_t>(code);
  }
  return c;
}
constexpr GridCodes kIq3xxsCodes = iq3xxs_codes();

// The codes of 32 indices (16-bit lanes, < 256) from the table's eight vectors: one word permute
// per 64 entries, the results chosen by index bits 6 and 7.
struct CodeTable {
  __m512i part[8];
  explicit CodeTable(const GridCodes& codes) {
    for (int t = 0; t < 8; ++t) part[t] = _mm512_load_si512(codes.code + 32 * t);
  }
  __m512i operator()(__m512i index) const {
    const __m512i r0 = _mm512_permutex2var_epi16(part[0], index, part[1]);
    const __m512i r1 = _mm512_permutex2var_epi16(part[2], index, part[3]);
    const __m512i r2 = _mm512_permutex2var_epi16(part[4], index, part[5]);
    const __m512i r3 = _mm512_permutex2var_epi16(part[6], index, part[7]);
    const __mmask32 b6 = _mm512_test_epi16_mask(index, _mm512_set1_epi16(64));
    const __mmask32 b7 = _mm512_test_epi16_mask(index, _mm512_set1_epi16(128));
    return _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, r0, r1),
                                   _mm512_mask_blend_epi16(b6, r2, r3));
  }
};

// The 64 values of sixteen entries, one entry's code in each 32-bit lane: vpmultishiftqb picks
// the 8 bits from 3 j of each lane (lanes 0 and 1 of a 64-bit word: bit 0 and bit 32 on) into its
// byte j, the low 3 bits name the level.
inline __m512i iq3xxs_values(__m512i lanes) {
  const __m512i fields = _mm512_set1_epi64(0x2926232009060300);
  const __m512i levels =
      _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq3xxsLevels)));
  return _mm512_shuffle_epi8(
      levels, _mm512_and_si512(_mm512_multishift_epi64_epi8(fields, lanes), _mm512_set1_epi8(7)));
}

struct CodesIQ3_XXS {
  using Block = BlockIQ3_XXS;
  template <class Visit>
  __attribute__((always_inline)) static float pairs(const Block& b, Visit&& visit) {
    uint64_t signs[4];
    const __m256i scales = iq3xxs_signs_scales(b, signs);
    const CodeTable table(kIq3xxsCodes);
    for (int h = 0; h < 2; ++h) {
      const __m512i codes = table(_mm512_cvtepu8_epi16(load256(b.qs + 32 * h)));
      for (int k = 0; k < 2; ++k) {
        // Pair 2 h + k's sixteen entries, one a 32-bit lane; value j of each is bits 3 j .. 3 j
        // + 2.
        const __m512i lanes = _mm512_cvtepu16_epi32(k == 0 ? _mm512_castsi512_si256(codes)
                                                           : _mm512_extracti64x4_epi64(codes, 1));
        visit(2 * h + k, GridPair{iq3xxs_values(lanes), _cvtu64_mask64(signs[2 * h + k]),
                                  pair_scale(scales, 2 * h + k)});
      }
    }
    return _cvtsh_ss(b.d) * 0.25f;
  }
};

}  // namespace

RowsKernel avx512vbmi_lowbit_kernel(DType t) {
  switch (t) {
    case DType::IQ3_XXS:
      return krows_driver<KKernel<VnniOps, Grid512<CodesIQ3_XXS>>>;
    default:
      return nullptr;
  }
}

}  // namespace ts::cpu

TS_ISA_END()
