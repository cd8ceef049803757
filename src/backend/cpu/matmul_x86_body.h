// The x86 matmul kernels, written once over an `Ops` policy (vector width of the float kernels,
// the int8 dot instruction) and compiled by matmul_kernels_avx2.cpp, _avx512.cpp and
// _avx512vnni.cpp for their own targets. Include it only there, inside the file's target pragma
// and after the same includes as below (so that those stay compiled for the baseline): everything
// defined here gets that file's instruction set. It lives in an anonymous namespace so that the
// compilations never merge at link time (an AVX-512 copy of a helper must not stand in for the
// AVX2 one).
//
// Integer kernels: a weight block is decoded to unsigned codes (q - offset is the weight's
// integer value) in 256-bit vectors of 32 bytes, dotted with the int8 activations into int32
// lanes (u8 x s8 products; for vpmaddubsw every pair sum must fit int16: codes are < 64, or
// <= 128 with q8_0's sign trick, and activations are within +-127), and scaled to float once
// per block (32-element types) or per super-block (k-quants, whose integer sub-block scales are
// applied in int32).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/matmul_kernels_impl.h"
#include "quant/blocks.h"

namespace ts::cpu {
namespace {

// ---- shared vector helpers -----------------------------------------------------------------

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

inline __m256i bytes(int v) {
  return _mm256_set1_epi8(static_cast<char>(v));
}

// Elements 0..15 are the low nibbles of qs[0..15], elements 16..31 the high nibbles: the 16 bytes
// in both halves, the upper half shifted down by 4 (64-bit lanes; the bits that cross a byte
// boundary are masked off).
inline __m256i nibbles32(const uint8_t* qs) {
  const __m256i q =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_set_epi64x(4, 4, 0, 0)), bytes(0x0F));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Byte i = 0x10 when bit i of the little-endian u32 at qh is set, else 0 (AVX2: spread the four
// bytes over the vector, test one bit per byte).
inline __m256i fifth_bits32_avx2(const uint8_t* qh) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(load_u32(qh))),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i select = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, bytes(0x10));
}

// Decode (a tile of one activation row) streams the weights from DRAM, but the work per byte
// leaves too few cache misses in flight for the hardware prefetchers (q8_0 streamed far below the
// f32 rate: docs/PERFORMANCE.md, "Measured choices"). So each weight row is prefetched this far
// ahead, one prefetch per 64-byte line: 8 KiB is two q8_0 rows of 4096 beyond the one being read
// (rows are usually contiguous, so a shorter distance lands in the next row of the tile, already
// on its way).
inline constexpr int64_t kPrefetchBytes = 8192;

template <int MT>
inline void prefetch_ahead(const void* p, size_t bytes) {
  if constexpr (MT == 1) {
    const char* ahead = static_cast<const char*>(p) + kPrefetchBytes;
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
  }
}

// Moves bit `from` of every byte to bit `to` (other bits garbage; the caller masks).
inline __m256i move_bit(__m256i v, int from, int to) {
  return from <= to ? _mm256_slli_epi16(v, to - from) : _mm256_srli_epi16(v, from - to);
}

// ---- float weights: f32, f16, bf16 converted to f32 on the fly ------------------------------

struct F32Row {
  const float* p;
};
struct F16Row {
  const uint16_t* p;
};
struct Bf16Row {
  const uint16_t* p;
};

inline float scalar_weight(F32Row w, int64_t k) {
  return w.p[k];
}
inline float scalar_weight(F16Row w, int64_t k) {
  return _cvtsh_ss(w.p[k]);
}
inline float scalar_weight(Bf16Row w, int64_t k) {
  const uint32_t bits = static_cast<uint32_t>(w.p[k]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// RT weight rows against MT activation rows: plain FMA accumulation in f32. Each weight vector
// feeds MT FMAs and each activation vector RT of them. Every output takes the same U =
// Ops::kFloatChains interleaved accumulators whatever the tile's shape, so that its sum does not
// depend on the tile it falls in: not on the thread pieces, the micro-batch, nor the other
// sequences of a batched decode step (U once followed the tile, 4 / 2 / 1, and batched decode
// moved in the last bits with it). AVX-512 keeps 2 (a 2 x 4 tile's 16 accumulators fit its 32
// registers); AVX2 1 (16 registers: 2 spilled its prompt tiles, which ran slower).
template <class Ops, class Row>
struct FloatKernel {
  template <int RT, int MT>
  static void tile(const uint8_t* w0, size_t stride, const PackedActs& x, int64_t m0,
                   float (*out)[kActTile]) {
    using V = typename Ops::VecF;
    constexpr int L = Ops::kLanes;
    constexpr int U = Ops::kFloatChains;
    Row w[RT];
    for (int r = 0; r < RT; ++r) w[r] = Row{reinterpret_cast<decltype(Row::p)>(w0 + r * stride)};
    const float* xs = x.f32 + m0 * x.K;
    const int64_t K = x.K;
    V acc[RT][MT][U];
    for (int r = 0; r < RT; ++r)
      for (int t = 0; t < MT; ++t)
        for (int u = 0; u < U; ++u) acc[r][t][u] = Ops::zero();
    int64_t k = 0;
    for (; k + U * L <= K; k += U * L)
      for (int u = 0; u < U; ++u) {
        V wv[RT];
        for (int r = 0; r < RT; ++r) {
          prefetch_ahead<MT>(w[r].p + k + u * L, 1);
          wv[r] = Ops::load(w[r], k + u * L);
        }
        for (int t = 0; t < MT; ++t) {
          V xv = Ops::load_x(xs + t * K + k + u * L);
          // Held in a register: left to itself the compiler folds the load into each of the RT
          // FMAs, and the tile runs at the load ports' rate, not the FMA units'.
          asm("" : "+v"(xv));
          for (int r = 0; r < RT; ++r) acc[r][t][u] = Ops::fma(wv[r], xv, acc[r][t][u]);
        }
      }
    for (int r = 0; r < RT; ++r)
      for (int t = 0; t < MT; ++t) {
        V sum = acc[r][t][0];
        for (int u = 1; u < U; ++u) sum = Ops::add(sum, acc[r][t][u]);
        float v = Ops::hsum(sum);
        for (int64_t kk = k; kk < K; ++kk) v += scalar_weight(w[r], kk) * xs[t * K + kk];
        out[r][t] = v;
      }
  }
};

// ---- 32-element block types -------------------------------------------------------------------
// A decoder gives the 32 unsigned codes of a block (q4_0, q5_0: value = d * (code - kOffset);
// q4_1, q5_1: value = d * code + m) or, for q8_0, its signed values. The offset is applied exactly
// in the integer dot: it starts from -kOffset * (sum of the activation block's int8 values).

struct DecQ4_0 {
  using Block = BlockQ4_0;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false, kSigned = false;
  template <class Ops>
  static __m256i codes(const Block& b) {
    return nibbles32(b.qs);
  }
};

struct DecQ4_1 {
  using Block = BlockQ4_1;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true, kSigned = false;
  template <class Ops>
  static __m256i codes(const Block& b) {
    return nibbles32(b.qs);
  }
};

struct DecQ5_0 {
  using Block = BlockQ5_0;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false, kSigned = false;
  template <class Ops>
  static __m256i codes(const Block& b) {
    return _mm256_or_si256(nibbles32(b.qs), Ops::fifth_bits32(b.qh));
  }
};

struct DecQ5_1 {
  using Block = BlockQ5_1;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true, kSigned = false;
  template <class Ops>
  static __m256i codes(const Block& b) {
    return _mm256_or_si256(nibbles32(b.qs), Ops::fifth_bits32(b.qh));
  }
};

// Signed values: with a non-saturating dot they become unsigned codes w + 128 (offset 128);
// vpmaddubsw would saturate on those, so the AVX2 path moves the sign onto the activations.
struct DecQ8_0 {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false, kSigned = true;
  template <class Ops>
  static __m256i codes(const Block& b) {
    return load256(b.qs);
  }
};

// A table of 16 signed values (the iq4 grid kIq4Levels, MXFP4's doubled e2m1 values
// kMxfp4Doubled) in both 128-bit lanes: a byte shuffle by the nibble codes gives the values.
inline __m256i table256(const int8_t (&table)[16]) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
}
inline __m256i iq4_levels256() {
  return table256(kIq4Levels);
}

// Signed values, as q8_0's.
struct DecIQ4_NL {
  using Block = BlockIQ4_NL;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false, kSigned = true;
  template <class Ops>
  static __m256i codes(const Block& b) {
    return _mm256_shuffle_epi8(iq4_levels256(), nibbles32(b.qs));
  }
};

// MXFP4: the doubled e2m1 values (kMxfp4Doubled, integers within +-12) by a byte shuffle, signed
// as q8_0's; the block's scale is the halved e8m0 one (block_scale), exact in f32.
struct DecMXFP4 {
  using Block = BlockMXFP4;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false, kSigned = true;
  template <class Ops>
  static __m256i codes(const Block& b) {
    return _mm256_shuffle_epi8(table256(kMxfp4Doubled), nibbles32(b.qs));
  }
};

// A 32-element block's float scale: its f16 d, or MXFP4's halved e8m0 exponent.
template <class Block>
inline float block_scale(const Block& b) {
  return _cvtsh_ss(b.d);
}
inline float block_scale(const BlockMXFP4& b) {
  return mxfp4_half_scale(b.e);
}

template <class Ops, class Dec>
struct Q32Kernel {
  // The u8 x s8 dot of weight block q (as decoded) with activation block xb, exactly.
  static __m256i block_dot(__m256i q, const BlockQ8A32& xb, __m256i xq) {
    if constexpr (Dec::kSigned && !Ops::kWideDot)
      return Ops::dot(_mm256_setzero_si256(), _mm256_sign_epi8(q, q), _mm256_sign_epi8(xq, q));
    const __m256i u = Dec::kSigned ? _mm256_xor_si256(q, bytes(0x80)) : q;
    if constexpr (Dec::kOffset == 0) return Ops::dot(_mm256_setzero_si256(), u, xq);
    const __m256i start = _mm256_setr_epi32(-Dec::kOffset * xb.sum, 0, 0, 0, 0, 0, 0, 0);
    return Ops::dot(start, u, xq);
  }

  template <int RT, int MT>
  static void tile(const uint8_t* w0, size_t stride, const PackedActs& x, int64_t m0,
                   float (*out)[kActTile]) {
    using Block = typename Dec::Block;
    const Block* w[RT];
    for (int r = 0; r < RT; ++r) w[r] = reinterpret_cast<const Block*>(w0 + r * stride);
    const int64_t nb = x.K / kQK32;
    const BlockQ8A32* xs[MT];
    for (int t = 0; t < MT; ++t)
      xs[t] = reinterpret_cast<const BlockQ8A32*>(x.data.data() + (m0 + t) * x.row_bytes);
    __m256 acc[RT][MT];
    float mins[RT][MT];
    for (int r = 0; r < RT; ++r)
      for (int t = 0; t < MT; ++t) acc[r][t] = _mm256_setzero_ps(), mins[r][t] = 0;
    for (int64_t b = 0; b < nb; ++b) {
      __m256i q[RT];
      float d[RT];
      for (int r = 0; r < RT; ++r) {
        prefetch_ahead<MT>(&w[r][b], sizeof(Block));
        q[r] = Dec::template codes<Ops>(w[r][b]);
        d[r] = block_scale(w[r][b]);
      }
      for (int t = 0; t < MT; ++t) {
        const BlockQ8A32& xb = xs[t][b];
        const __m256i xq = load256(xb.qs);
        for (int r = 0; r < RT; ++r) {
          const __m256i p = block_dot(q[r], xb, xq);
          if constexpr (Dec::kMin)
            mins[r][t] += _cvtsh_ss(w[r][b].m) * (xb.d * static_cast<float>(xb.sum));
          acc[r][t] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d[r] * xb.d), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < RT; ++r)
      for (int t = 0; t < MT; ++t) out[r][t] = hsum256(acc[r][t]) + mins[r][t];
  }
};

// ---- k-quants ----------------------------------------------------------------------------------
// A decoder fills the eight 32-code chunks of a super-block, the int16 scale of each 16-element
// sub-block (and min, where the type has mins), and d / dmin. value = d * scale * (code - kOffset)
// - dmin * min. A kSigned decoder (iq4_xs) fills signed values instead, as q8_0's: the row kernels
// dot them with the sign trick (their vpmaddubsw would saturate on value + 128), the GEMM as
// unsigned codes value + 128 with the offset 1 << kOffsetShift.

struct KDecoded {
  __m256i u[8];
  __m256i scale16;  // int16 lane j: scale of sub-block j
  __m256i min16;    // int16 lane j: min of sub-block j (types with mins)
  float d;
  float dmin;
};

// Unpacks the twelve 6-bit scale / min bytes of q4_k / q5_k (see k4_scale_min) as three 32-bit
// words w0 w1 w2: scales 0..3 = w0 & 63 (per byte), scales 4..7 = (w2 & 15) | (w0 >> 6) << 4,
// mins 0..3 = w1 & 63, mins 4..7 = (w2 >> 4) | (w1 >> 6) << 4. Each value is repeated for the
// two 16-element halves of its 32-element sub-block. Reads 16 bytes: the 4 after the scales are
// the block's quants, ignored.
inline void k4_scales(const uint8_t* packed, KDecoded& k) {
  const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  const __m128i a = _mm_shuffle_epi32(w, _MM_SHUFFLE(2, 1, 2, 0));  // w0 w2 w1 w2
  const __m128i b = _mm_shuffle_epi32(w, _MM_SHUFFLE(1, 1, 0, 0));  // w0 w0 w1 w1
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(a, _mm_set_epi32(4, 0, 0, 0)),
                                    _mm_set_epi32(0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F));
  const __m128i high =
      _mm_and_si128(_mm_srli_epi32(b, 2), _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
  const __m128i all = _mm_or_si128(low, high);  // bytes: scales 0..7, mins 0..7
  const __m128i twice_lo = _mm_set_epi8(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m128i twice_hi = _mm_add_epi8(twice_lo, _mm_set1_epi8(8));
  k.scale16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(all, twice_lo));
  k.min16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(all, twice_hi));
}

// The sixteen signed 6-bit scales of q3_k (see q3k_scale) from its twelve scale bytes as words
// w0 w1 w2: sub-blocks 4i..4i+3 take their low 4 bits from w(i % 2) >> 4 (i / 2) and their top
// 2 bits from w2 >> 2i. Reads the 16 bytes that end with the block's d (the scales are 2 bytes
// before the end of the block) and drops the two in front.
inline __m256i q3k_scales(const BlockQ3_K& block) {
  const auto* end = reinterpret_cast<const uint8_t*>(&block) + sizeof(BlockQ3_K);
  const __m128i w = _mm_srli_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(end - 16)), 2);
  const __m128i low = _mm_and_si128(
      _mm_srlv_epi32(_mm_shuffle_epi32(w, _MM_SHUFFLE(1, 0, 1, 0)), _mm_set_epi32(4, 4, 0, 0)),
      _mm_set1_epi8(0x0F));
  const __m128i top = _mm_and_si128(
      _mm_srlv_epi32(_mm_shuffle_epi32(w, _MM_SHUFFLE(2, 2, 2, 2)), _mm_set_epi32(6, 4, 2, 0)),
      _mm_set1_epi8(0x03));
  const __m128i biased = _mm_or_si128(low, _mm_slli_epi32(top, 4));
  return _mm256_cvtepi8_epi16(_mm_sub_epi8(biased, _mm_set1_epi8(32)));
}

struct DecQ2_K {
  using Block = BlockQ2_K;
  static constexpr int kOffsetShift = -1;  // no offset
  static constexpr bool kMin = true, kSigned = false;
  static void decode(const Block& b, KDecoded& k) {
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(b.qs + 32 * h);
      for (int s = 0; s < 4; ++s)
        k.u[4 * h + s] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), bytes(3));
    }
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    k.scale16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, low4));
    k.min16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
    k.d = _cvtsh_ss(b.d), k.dmin = _cvtsh_ss(b.dmin);
  }
};

struct DecQ3_K {
  using Block = BlockQ3_K;
  static constexpr int kOffsetShift = 2;  // codes 0..7 carry an offset of 4
  static constexpr bool kMin = false, kSigned = false;
  static void decode(const Block& b, KDecoded& k) {
    const __m256i hm = load256(b.hmask);
    for (int c = 0; c < 8; ++c) {
      const __m256i q = load256(b.qs + 32 * (c / 4));
      const __m256i low = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (c % 4)), bytes(3));
      k.u[c] = _mm256_or_si256(low, _mm256_and_si256(move_bit(hm, c, 2), bytes(4)));
    }
    k.scale16 = q3k_scales(b);
    k.d = _cvtsh_ss(b.d), k.dmin = 0;
  }
};

struct DecQ4_K {
  using Block = BlockQ4_K;
  static constexpr int kOffsetShift = -1;
  static constexpr bool kMin = true, kSigned = false;
  static void decode(const Block& b, KDecoded& k) {
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(b.qs + 32 * c);
      k.u[2 * c] = _mm256_and_si256(q, bytes(0x0F));
      k.u[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), bytes(0x0F));
    }
    k4_scales(b.scales, k);
    k.d = _cvtsh_ss(b.d), k.dmin = _cvtsh_ss(b.dmin);
  }
};

struct DecQ5_K {
  using Block = BlockQ5_K;
  static constexpr int kOffsetShift = -1;
  static constexpr bool kMin = true, kSigned = false;
  static void decode(const Block& b, KDecoded& k) {
    const __m256i qh = load256(b.qh);
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(b.qs + 32 * c);
      k.u[2 * c] = _mm256_and_si256(q, bytes(0x0F));
      k.u[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), bytes(0x0F));
    }
    for (int c = 0; c < 8; ++c)
      k.u[c] = _mm256_or_si256(k.u[c], _mm256_and_si256(move_bit(qh, c, 4), bytes(0x10)));
    k4_scales(b.scales, k);
    k.d = _cvtsh_ss(b.d), k.dmin = _cvtsh_ss(b.dmin);
  }
};

struct DecQ6_K {
  using Block = BlockQ6_K;
  static constexpr int kOffsetShift = 5;  // codes 0..63 carry an offset of 32
  static constexpr bool kMin = false, kSigned = false;
  static void decode(const Block& b, KDecoded& k) {
    for (int h = 0; h < 2; ++h) {
      const __m256i lo_a = load256(b.ql + 64 * h);       // elements 128 h + 0..31 and + 64..95
      const __m256i lo_b = load256(b.ql + 64 * h + 32);  // elements 128 h + 32..63 and + 96..127
      const __m256i hi = load256(b.qh + 32 * h);
      const __m256i low[4] = {_mm256_and_si256(lo_a, bytes(0x0F)),
                              _mm256_and_si256(lo_b, bytes(0x0F)),
                              _mm256_and_si256(_mm256_srli_epi16(lo_a, 4), bytes(0x0F)),
                              _mm256_and_si256(_mm256_srli_epi16(lo_b, 4), bytes(0x0F))};
      for (int s = 0; s < 4; ++s) {
        const __m256i high = _mm256_and_si256(move_bit(hi, 2 * s, 4), bytes(0x30));
        k.u[4 * h + s] = _mm256_or_si256(low[s], high);
      }
    }
    k.scale16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    k.d = _cvtsh_ss(b.d), k.dmin = 0;
  }
};

// The sixteen int16 scales of iq4_xs (see iq4xs_scale), each 32-element sub-block's twice: in
// 32-bit lane j, nibble j of scales_l (as a little-endian u32) and bits 2j of scales_h, less 32,
// copied into both 16-bit halves.
inline __m256i iq4xs_scales(const BlockIQ4_XS& b) {
  const __m256i j = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i low =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(load_u32(b.scales_l))),
                                         _mm256_slli_epi32(j, 2)),
                       _mm256_set1_epi32(0x0F));
  const __m256i high =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h), _mm256_slli_epi32(j, 1)),
                       _mm256_set1_epi32(0x03));
  const __m256i scale =
      _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
  return _mm256_or_si256(_mm256_and_si256(scale, _mm256_set1_epi32(0xFFFF)),
                         _mm256_slli_epi32(scale, 16));
}

struct DecIQ4_XS {
  using Block = BlockIQ4_XS;
  static constexpr int kOffsetShift = 7;  // the GEMM's codes value + 128
  static constexpr bool kMin = false, kSigned = true;
  static void decode(const Block& b, KDecoded& k) {
    const __m256i levels = iq4_levels256();
    for (int c = 0; c < 8; ++c) k.u[c] = _mm256_shuffle_epi8(levels, nibbles32(b.qs + 16 * c));
    k.scale16 = iq4xs_scales(b);
    k.d = _cvtsh_ss(b.d), k.dmin = 0;
  }
};

// The int16 scale vectors of the eight chunks: chunk c has sub-block 2c's scale in its low 128
// bits and 2c + 1's in its high 128 bits. One byte shuffle each, from the 128-bit half of the
// sixteen scales that holds them, repeated in both lanes.
inline void chunk_scales(__m256i scale16, __m256i* out) {
  const __m256i halves[2] = {_mm256_permute2x128_si256(scale16, scale16, 0x00),
                             _mm256_permute2x128_si256(scale16, scale16, 0x11)};
  for (int c = 0; c < 8; ++c) {
    const int64_t lo = 0x0100010001000100 + (c % 4) * 0x0404040404040404;
    const int64_t hi = lo + 0x0202020202020202;
    out[c] = _mm256_shuffle_epi8(halves[c / 4], _mm256_set_epi64x(hi, hi, lo, lo));
  }
}

// The scaled chunk dots of one decoded super-block against an activation block, 256 bits at a
// time: chunk c's 32 codes times 32 int8 activations, pair sums times the chunk's int16 scales,
// summed over the chunks into int32 lanes (two chains: a dot-accumulate has a latency of several
// cycles). Ops can substitute a wider version (Ops::KDot).
template <class Ops>
struct KDot256 {
  // Weight rows a prompt decodes together (KKernel::chunk): 4 measured slower here
  // (docs/PERFORMANCE.md, "Measured choices").
  static constexpr int kChunkRows = 2;
  struct Chunks {
    __m256i scale[8];
  };
  template <bool kSigned>
  static void prepare(const KDecoded& k, Chunks& ch) {
    chunk_scales(k.scale16, ch.scale);
  }
  // Chunk c's codes times the activations (for signed values: |value| times the activations
  // with the value's sign).
  template <bool kSigned>
  static __m256i chunk_dot(__m256i acc, const KDecoded& k, const Chunks& ch, const int8_t* xq,
                           int c) {
    const __m256i x = load256(xq + 32 * c);
    if constexpr (kSigned)
      return Ops::dot_scaled(acc, _mm256_sign_epi8(k.u[c], k.u[c]), _mm256_sign_epi8(x, k.u[c]),
                             ch.scale[c]);
    return Ops::dot_scaled(acc, k.u[c], x, ch.scale[c]);
  }
  template <bool kSigned>
  static __m256i dot(const KDecoded& k, const Chunks& ch, const int8_t* xq) {
    __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
    for (int c = 0; c < 8; c += 2) {
      even = chunk_dot<kSigned>(even, k, ch, xq, c);
      odd = chunk_dot<kSigned>(odd, k, ch, xq, c + 1);
    }
    return _mm256_add_epi32(even, odd);
  }
};

template <class Ops, class Dec>
struct KKernel {
  using Block = typename Dec::Block;
  using KDot = typename Ops::KDot;

  // A super-block decoded into the dot's chunks: straight, where the decoder writes them (the
  // 512-bit grid decoders), else through the 256-bit form.
  __attribute__((always_inline)) static void decode(const Block& b, KDecoded& k,
                                                    typename KDot::Chunks& ch) {
    if constexpr (requires { Dec::decode(b, k, ch); }) {
      Dec::decode(b, k, ch);
    } else {
      Dec::decode(b, k);
      KDot::template prepare<Dec::kSigned>(k, ch);
    }
  }

  // Adds super-block b of RT decoded weight rows, dotted with activation block xb, to acc[r].
  // Always inlined: tile()'s accumulators must stay in registers (a call slowed decode,
  // docs/PERFORMANCE.md, "Measured choices").
  template <int RT>
  __attribute__((always_inline)) static void add_block(const KDecoded (&k)[RT],
                                                       const typename KDot::Chunks (&chunks)[RT],
                                                       const BlockQ8K& xb, __m256 (&acc)[RT]) {
    __m256i isum[RT];
    for (int r = 0; r < RT; ++r) isum[r] = KDot::template dot<Dec::kSigned>(k[r], chunks[r], xb.qs);
    const __m256i bsums = load256(xb.bsums);
    for (int r = 0; r < RT; ++r) {
      if constexpr (Dec::kOffsetShift >= 0 && !Dec::kSigned) {  // - offset * sum_j scale_j bsum_j
        const __m256i offsets = _mm256_madd_epi16(bsums, k[r].scale16);
        isum[r] = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(offsets, Dec::kOffsetShift));
      }
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(k[r].d * xb.d), acc[r]);
      if constexpr (Dec::kMin) {
        const __m256i msum = _mm256_madd_epi16(bsums, k[r].min16);
        acc[r] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-k[r].dmin * xb.d), acc[r]);
      }
    }
  }

  // RT weight rows x MT activation rows, every accumulator in a register.
  template <int RT, int MT>
  static void tile(const uint8_t* w0, size_t stride, const PackedActs& x, int64_t m0,
                   float (*out)[kActTile]) {
    const Block* w[RT];
    for (int r = 0; r < RT; ++r) w[r] = reinterpret_cast<const Block*>(w0 + r * stride);
    const int64_t nb = x.K / kQKK;
    const BlockQ8K* xs[MT];
    for (int t = 0; t < MT; ++t)
      xs[t] = reinterpret_cast<const BlockQ8K*>(x.data.data() + (m0 + t) * x.row_bytes);
    __m256 acc[MT][RT];
    for (int t = 0; t < MT; ++t)
      for (int r = 0; r < RT; ++r) acc[t][r] = _mm256_setzero_ps();
    if constexpr (MT == 1 && requires(float d) { Dec::dot(w[0][0], xs[0]->qs, &d); }) {
      // One activation row: nothing reuses a decoded block, so the decoder dots as it decodes.
      for (int64_t b = 0; b < nb; ++b)
#pragma GCC unroll 4  // the accumulators in registers (the decoders' code is long)
        for (int r = 0; r < RT; ++r) {
          prefetch_ahead<MT>(&w[r][b], sizeof(Block));
          float d;
          const __m256i isum = Dec::dot(w[r][b], xs[0][b].qs, &d);
          acc[0][r] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * xs[0][b].d), acc[0][r]);
        }
      for (int r = 0; r < RT; ++r) out[r][0] = hsum256(acc[0][r]);
      return;
    }
    KDecoded k[RT];
    typename KDot::Chunks chunks[RT];
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < RT; ++r) {
        prefetch_ahead<MT>(&w[r][b], sizeof(Block));
        decode(w[r][b], k[r], chunks[r]);
      }
      for (int t = 0; t < MT; ++t) add_block<RT>(k, chunks, xs[t][b], acc[t]);
    }
    for (int r = 0; r < RT; ++r)
      for (int t = 0; t < MT; ++t) out[r][t] = hsum256(acc[t][r]);
  }

  // RT weight rows x mt (<= kActChunk) activation rows, the accumulators in memory: a super-block
  // is decoded once for all of them. Decoding one costs about as much as dotting it with a few
  // activation rows, so the register tiles, which decode it again for every kActTile rows, spent
  // a large part of a prompt's matmuls decoding. Same sums in the same order as tile().
  template <int RT>
  static void chunk(const uint8_t* w0, size_t stride, const PackedActs& x, int64_t m0, int mt,
                    float (*out)[RT]) {
    const Block* w[RT];
    for (int r = 0; r < RT; ++r) w[r] = reinterpret_cast<const Block*>(w0 + r * stride);
    const int64_t nb = x.K / kQKK;
    const auto* xs = reinterpret_cast<const uint8_t*>(x.data.data()) + m0 * x.row_bytes;
    __m256 acc[kActChunk][RT];
    for (int t = 0; t < mt; ++t)
      for (int r = 0; r < RT; ++r) acc[t][r] = _mm256_setzero_ps();
    KDecoded k[RT];
    typename KDot::Chunks chunks[RT];
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < RT; ++r) decode(w[r][b], k[r], chunks[r]);
      for (int t = 0; t < mt; ++t)
        add_block<RT>(k, chunks, reinterpret_cast<const BlockQ8K*>(xs + t * x.row_bytes)[b],
                      acc[t]);
    }
    for (int t = 0; t < mt; ++t)
      for (int r = 0; r < RT; ++r) out[t][r] = hsum256(acc[t][r]);
  }
};

// ---- driver ------------------------------------------------------------------------------------

template <class Kernel, int RT>
void run_tile(const WeightView& w, const PackedActs& x, int64_t r, int64_t m0, int mt, float* y,
              int64_t ldy) {
  float out[RT][kActTile];
  const uint8_t* row = w.data + r * w.row_stride;
  switch (mt) {
    case 4:
      Kernel::template tile<RT, 4>(row, w.row_stride, x, m0, out);
      break;
    case 3:
      Kernel::template tile<RT, 3>(row, w.row_stride, x, m0, out);
      break;
    case 2:
      Kernel::template tile<RT, 2>(row, w.row_stride, x, m0, out);
      break;
    default:
      Kernel::template tile<RT, 1>(row, w.row_stride, x, m0, out);
      break;
  }
  for (int i = 0; i < RT; ++i)
    for (int t = 0; t < mt; ++t) y[(m0 + t) * ldy + r + i] = out[i][t];
}

// Weight rows in chunks of kRowChunk; each chunk meets every tile of kActTile activation rows
// while it is hot in cache, so a weight row is read from memory once per matmul. Inside a chunk,
// register tiles of kRowTile weight rows x kActTile activation rows.
template <class Kernel>
void rows_driver(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t ldy) {
  static_assert(kRowTile == 2);
  // Decode: the tiles prefetch kPrefetchBytes ahead of themselves, so the first that many bytes of
  // the range would arrive on demand, one miss at a time (a thread runs several ranges per matmul).
  if (x.M == 1) {
    const char* start = reinterpret_cast<const char*>(w.data + r0 * w.row_stride);
    const int64_t bytes = std::min<int64_t>(kPrefetchBytes, (r1 - r0) * w.row_stride);
    for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(start + off, _MM_HINT_T0);
  }
  for (int64_t rc = r0; rc < r1; rc += kRowChunk) {
    const int64_t re = std::min(rc + kRowChunk, r1);
    for (int64_t m0 = 0; m0 < x.M; m0 += kActTile) {
      const int mt = static_cast<int>(std::min<int64_t>(kActTile, x.M - m0));
      int64_t r = rc;
      for (; r + 2 <= re; r += 2) run_tile<Kernel, 2>(w, x, r, m0, mt, y, ldy);
      if (r < re) run_tile<Kernel, 1>(w, x, r, m0, mt, y, ldy);
    }
  }
}

// k-quant weights: prompts (more than kActTile activation rows) through KKernel::chunk,
// KDot::kChunkRows weight rows of a kRowChunk chunk at a time against kActChunk activation rows;
// one row through the register tiles of rows_driver.
template <class Kernel>
void krows_driver(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                  int64_t ldy) {
  if (x.M <= kActTile) return rows_driver<Kernel>(w, x, r0, r1, y, ldy);
  constexpr int kChunkRows = Kernel::KDot::kChunkRows;
  for (int64_t rc = r0; rc < r1; rc += kRowChunk) {
    const int64_t re = std::min(rc + kRowChunk, r1);
    for (int64_t m0 = 0; m0 < x.M; m0 += kActChunk) {
      const int mt = static_cast<int>(std::min<int64_t>(kActChunk, x.M - m0));
      float out[kActChunk][kChunkRows];
      int64_t r = rc;
      for (; r + kChunkRows <= re; r += kChunkRows) {
        Kernel::template chunk<kChunkRows>(w.data + r * w.row_stride, w.row_stride, x, m0, mt, out);
        for (int t = 0; t < mt; ++t)
          for (int i = 0; i < kChunkRows; ++i) y[(m0 + t) * ldy + r + i] = out[t][i];
      }
      for (; r < re; ++r) {
        float last[kActChunk][1];
        Kernel::template chunk<1>(w.data + r * w.row_stride, w.row_stride, x, m0, mt, last);
        for (int t = 0; t < mt; ++t) y[(m0 + t) * ldy + r] = last[t][0];
      }
    }
  }
}

// Float weights: as rows_driver, with prompts (more than one activation row) in tiles of
// Ops::kFloatRowTile weight rows, which the wider register file holds (the accumulators of a
// 3 x 4 tile fill 24 of AVX-512's 32): each activation vector loaded feeds three FMAs, not two.
template <class Kernel, class Ops>
void float_rows_driver(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                       int64_t ldy) {
  constexpr int RT = Ops::kFloatRowTile;
  if (RT == kRowTile || x.M == 1) return rows_driver<Kernel>(w, x, r0, r1, y, ldy);
  constexpr int64_t chunk = kRowChunk / RT * RT;
  for (int64_t rc = r0; rc < r1; rc += chunk) {
    const int64_t re = std::min(rc + chunk, r1);
    for (int64_t m0 = 0; m0 < x.M; m0 += kActTile) {
      const int mt = static_cast<int>(std::min<int64_t>(kActTile, x.M - m0));
      int64_t r = rc;
      for (; r + RT <= re; r += RT) run_tile<Kernel, RT>(w, x, r, m0, mt, y, ldy);
      for (; r < re; ++r) run_tile<Kernel, 1>(w, x, r, m0, mt, y, ldy);
    }
  }
}

template <class Ops>
RowsKernel x86_float_kernel(DType t) {
  switch (t) {
    case DType::F32:
      return float_rows_driver<FloatKernel<Ops, F32Row>, Ops>;
    case DType::F16:
      return float_rows_driver<FloatKernel<Ops, F16Row>, Ops>;
    case DType::BF16:
      return float_rows_driver<FloatKernel<Ops, Bf16Row>, Ops>;
    default:
      return nullptr;
  }
}

template <class Ops>
RowsKernel x86_int_kernel(DType t) {
  switch (t) {
    case DType::Q4_0:
      return rows_driver<Q32Kernel<Ops, DecQ4_0>>;
    case DType::Q4_1:
      return rows_driver<Q32Kernel<Ops, DecQ4_1>>;
    case DType::Q5_0:
      return rows_driver<Q32Kernel<Ops, DecQ5_0>>;
    case DType::Q5_1:
      return rows_driver<Q32Kernel<Ops, DecQ5_1>>;
    case DType::Q8_0:
      return rows_driver<Q32Kernel<Ops, DecQ8_0>>;
    case DType::IQ4_NL:
      return rows_driver<Q32Kernel<Ops, DecIQ4_NL>>;
    case DType::MXFP4:
      return rows_driver<Q32Kernel<Ops, DecMXFP4>>;
    case DType::Q2_K:
      return krows_driver<KKernel<Ops, DecQ2_K>>;
    case DType::Q3_K:
      return krows_driver<KKernel<Ops, DecQ3_K>>;
    case DType::Q4_K:
      return krows_driver<KKernel<Ops, DecQ4_K>>;
    case DType::Q5_K:
      return krows_driver<KKernel<Ops, DecQ5_K>>;
    case DType::Q6_K:
      return krows_driver<KKernel<Ops, DecQ6_K>>;
    case DType::IQ4_XS:
      return krows_driver<KKernel<Ops, DecIQ4_XS>>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace ts::cpu
