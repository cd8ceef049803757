// Decode GEMV (one activation row) of the block-quantised weights through int8 activations. The
// f32 kernels of gemv.cu spend ~3 instructions per weight element decoding bytes to floats, which
// keeps them well under the HBM rate; here the activation row is quantised once per matmul to int8
// per 32 elements (as the CPU backend does; or by the norm, GLU or attention kernel that wrote it,
// act_quant.cuh), and each weight block becomes 32-bit words of int8 codes that __dp4a multiplies
// four at a time, the scales applied once per 32 (or 16) elements.
//
// On Hopper (sm_90), blocks that only keep 2-byte alignment (q8_0: 34 bytes, q6_k: 210, q4_0 /
// q4_1 / q5_0 / q5_1: 18..24, q2_k: 84, q3_k: 110, iq4_nl: 18, iq4_xs: 136) are staged: a block of
// 8 rows stages a segment (2048 elements) of each row in shared memory: one thread issues a bulk
// copy per row (cp.async.bulk, completing on an mbarrier), 2 to 6 stages deep, so that the copy
// engine, not the threads, moves the bytes; the GEMV is launched as a programmatic dependent of the
// quantisation kernel, so that these copies start while the activations are being quantised. Each
// thread then takes one 32-element unit of two rows: it reads the unit's int8 activations once, as
// two 16-byte loads, each row's quants as aligned 32-bit words shifted into place, and adds each
// row's float term to that row's partial sum. A row is two warps; their sums meet through shared
// memory.
//
// Units that lie on 16-byte boundaries need no staging: q8_0 weights the backend packed into
// 4-row groups (q8_groups.cuh), q6_k weights it packed into rows of d-less 208-byte bodies
// (q6_rows.cuh), and q4_k / q5_k rows that start on 16-byte boundaries (a 144- or 176-byte block
// is 16-byte vectors: d, dmin and scales, q5_k's fifth bits, then the nibbles).
// gemv_direct_kernel loads them straight into registers, on every architecture.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>

#include "backend/cuda/act_quant.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/expert_index.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q6_rows.cuh"
#include "backend/cuda/q8_groups.cuh"
#include "backend/cuda/quant_device.cuh"
#include "backend/weight_layout.h"
#include "core/error.h"

namespace ts::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRows = 4;                             // rows per block
constexpr int kUnit = 32;                            // elements per thread per segment
constexpr int kSegElems = kThreads / kRows * kUnit;  // 2048 elements per row per segment
// Eight blocks of 256 threads fill a multiprocessor (2048 threads); kernels whose threads take
// more than one row run fewer, each with a larger share of the 228 KiB of shared memory (less the
// 1 KiB the hardware reserves a block).
constexpr int kBlocksPerSm = 8;
// Activation rows of one direct launch at most (gemv_direct_kernel's kX): more would take more
// registers than the blocks per SM of kBlocksBatched leave.
constexpr int64_t kLaunchRows = 4;
// Weight rows a thread of a one-row launch takes (gemv_direct_kernel's kR, Seg<T>::kThreadRows):
// it loads each unit's activations once for all of them.
constexpr int kThreadRows = 2;
// Static shared memory a block may declare.
constexpr int kStaticSmem = 48 * 1024;

// ---- activation quantisation: one warp per 32-element block ----

__global__ void __launch_bounds__(kThreads)
    quantize_acts_kernel(const float* x, int64_t blocks, ActsView out) {
  // Lets the GEMV that follows start its weight copies now, then waits for the kernel ahead
  // (which wrote x, and may be the last GEMV still reading this scratch) before touching either.
  pdl_enter();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (b >= blocks) return;  // the whole warp
  const int64_t e = b * 32 + threadIdx.x % 32;
  const float v[1] = {x[e]};
  quantize_block_part<1>(v, true, e, out);
}

// ---- shared-memory reads of 2-byte aligned block fields ----

// N 32-bit words starting at `p` (2-byte aligned, in shared memory): N + 1 aligned loads, each
// pair funnel-shifted into place.
template <int N>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t (&v)[N]) {
  const uint32_t shift = (reinterpret_cast<uintptr_t>(p) & 2) * 8;
  const auto* a = reinterpret_cast<const uint32_t*>(p - (reinterpret_cast<uintptr_t>(p) & 2));
  uint32_t w[N + 1];
#pragma unroll
  for (int i = 0; i < N + 1; ++i) w[i] = a[i];
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = __funnelshift_r(w[i], w[i + 1], shift);
}

__device__ __forceinline__ int dp4a8(const uint32_t (&q)[8], const uint4 (&x)[2], int first,
                                     int count) {
  const uint32_t xs[8] = {x[0].x, x[0].y, x[0].z, x[0].w, x[1].x, x[1].y, x[1].z, x[1].w};
  int s = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i >= first && i < first + count)
      s = __dp4a(static_cast<int>(q[i]), static_cast<int>(xs[i]), s);
  return s;
}

// unit_dot<T>(seg, j, x, a): the dot of 32-element unit j of a row segment staged at `seg` with
// its int8 activations x (32 codes) and their block term a. Integer sums are exact; the float
// terms are the weight's scales times a.d. Specialised for q8_0, the k-quants and the iq4 types;
// the primary definition, further down, is the legacy types'.
template <DType T>
__device__ __forceinline__ float unit_dot(const uint8_t* seg, int j, const uint4 (&x)[2],
                                          ActBlock a);

template <>
__device__ __forceinline__ float unit_dot<DType::Q8_0>(const uint8_t* seg, int j,
                                                       const uint4 (&x)[2], ActBlock a) {
  const uint8_t* b = seg + j * static_cast<int>(sizeof(BlockQ8_0));
  uint32_t q[8];
  load_words<8>(b + offsetof(BlockQ8_0, qs), q);
  const int s = dp4a8(q, x, 0, 8);
  return half_bits_to_float(load_u16(b + offsetof(BlockQ8_0, d))) * a.d * static_cast<float>(s);
}

// Elements 32 sub .. 32 sub + 31 of a q6_k block: h = sub / 4 picks the 128-element half, the low
// nibbles come from ql[64 h + 32 (sub % 2)] shifted by 4 ((sub % 4) / 2), the high two bits from
// qh[32 h] shifted by 2 (sub % 4); q - 32 with one int8 scale per 16 elements (sc0, sc1), d per
// block. lo and hi are those 32 bytes of ql and of qh; lo is overwritten. Both layouts' units
// (unit_dot<Q6_K>, Q6KUnits) end here, so they give the same bits.
__device__ __forceinline__ float q6k_unit(uint32_t (&lo)[8], const uint32_t (&hi)[8], int sub,
                                          int sc0, int sc1, uint16_t d, const uint4 (&x)[2],
                                          ActBlock a) {
  const int r = sub % 4, lo_shift = 4 * (r / 2), hi_shift = 2 * r;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    lo[i] = ((lo[i] >> lo_shift) & 0x0F0F0F0Fu) | (((hi[i] >> hi_shift) & 0x03030303u) << 4);
  const int s0 = dp4a8(lo, x, 0, 4) - 32 * a.s0;
  const int s1 = dp4a8(lo, x, 4, 4) - 32 * a.s1;
  const int s = sc0 * s0 + sc1 * s1;
  return half_bits_to_float(d) * a.d * static_cast<float>(s);
}

template <>
__device__ __forceinline__ float unit_dot<DType::Q6_K>(const uint8_t* seg, int j,
                                                       const uint4 (&x)[2], ActBlock a) {
  const uint8_t* b = seg + (j / 8) * static_cast<int>(sizeof(BlockQ6_K));
  const int sub = j % 8, h = sub / 4;
  uint32_t lo[8], hi[8];
  load_words<8>(b + offsetof(BlockQ6_K, ql) + 64 * h + 32 * (sub % 2), lo);
  load_words<8>(b + offsetof(BlockQ6_K, qh) + 32 * h, hi);
  const auto* scales = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales));
  return q6k_unit(lo, hi, sub, scales[2 * sub], scales[2 * sub + 1],
                  load_u16(b + offsetof(BlockQ6_K, d)), x, a);
}

// The 32 codes of a 32-element block's 16 nibble bytes (element i < 16: the low nibble of byte i,
// else the high nibble of byte i - 16), in element order, as eight words of bytes.
__device__ __forceinline__ void nibble_words(const uint8_t* qs, uint32_t (&q)[8]) {
  uint32_t v[4];
  load_words<4>(qs, v);
#pragma unroll
  for (int i = 0; i < 4; ++i) q[i] = v[i] & 0x0F0F0F0Fu, q[i + 4] = (v[i] >> 4) & 0x0F0F0F0Fu;
}

// q5_0 / q5_1: bit i of qh is element i's fifth bit. Word k's four bits go to bit 4 of its bytes
// (the multiply puts bit b at 8 b + 4 - 4 and at no other multiple of 8: b + 7 m = 8 b' only for
// b = b' = m, and the shifted copies never overlap, so nothing carries).
__device__ __forceinline__ void add_fifth_bits(uint32_t qh, uint32_t (&q)[8]) {
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k] |= ((((qh >> (4 * k)) & 0xFu) * 0x00204081u) & 0x01010101u) << 4;
}

// The legacy 32-element types: x = d * (q - offset) (q4_0: 8, q5_0: 16), or d * q + m (q4_1,
// q5_1), q holding a fifth bit in q5_0 / q5_1. The block's fields say which.
template <class Block>
__device__ __forceinline__ float legacy_unit_dot(const uint8_t* b, const uint4 (&x)[2],
                                                 ActBlock a) {
  constexpr bool kFifthBit = requires(Block blk) {
    blk.qh;
  };
  uint32_t q[8];
  nibble_words(b + offsetof(Block, qs), q);
  if constexpr (kFifthBit) {
    uint32_t qh[1];
    load_words<1>(b + offsetof(Block, qh), qh);
    add_fifth_bits(qh[0], q);
  }
  const float d = half_bits_to_float(load_u16(b + offsetof(Block, d)));
  if constexpr (requires(Block blk) { blk.m; }) {  // d * sum(q x) + m * sum(x)
    const float m = half_bits_to_float(load_u16(b + offsetof(Block, m)));
    return a.d * (d * static_cast<float>(dp4a8(q, x, 0, 8)) + m * static_cast<float>(a.s0 + a.s1));
  } else {
    const int offset = kFifthBit ? 16 : 8;
    return d * a.d * static_cast<float>(dp4a8(q, x, 0, 8) - offset * (a.s0 + a.s1));
  }
}

// iq4_nl / iq4_xs: the 32 nibbles of a unit index the non-uniform grid of int8 levels
// (iq4_levels4), so the codes are the levels themselves and the sum needs no offset.
__device__ __forceinline__ int iq4_unit_sum(const uint8_t* qs, const uint4 (&x)[2]) {
  uint32_t q[8];
  nibble_words(qs, q);
#pragma unroll
  for (int i = 0; i < 8; ++i) q[i] = iq4_levels4(q[i]);
  return dp4a8(q, x, 0, 8);
}

template <>
__device__ __forceinline__ float unit_dot<DType::IQ4_NL>(const uint8_t* seg, int j,
                                                         const uint4 (&x)[2], ActBlock a) {
  const uint8_t* b = seg + j * static_cast<int>(sizeof(BlockIQ4_NL));
  const int s = iq4_unit_sum(b + offsetof(BlockIQ4_NL, qs), x);
  return half_bits_to_float(load_u16(b + offsetof(BlockIQ4_NL, d))) * a.d * static_cast<float>(s);
}

// Sub-block sub (0..7) of an iq4_xs block: its 16 nibble bytes and a signed 6-bit scale.
template <>
__device__ __forceinline__ float unit_dot<DType::IQ4_XS>(const uint8_t* seg, int j,
                                                         const uint4 (&x)[2], ActBlock a) {
  const uint8_t* b = seg + (j / 8) * static_cast<int>(sizeof(BlockIQ4_XS));
  const int sub = j % 8;
  const int s = iq4_unit_sum(b + offsetof(BlockIQ4_XS, qs) + 16 * sub, x);
  const int scale = iq4xs_scale_dev(reinterpret_cast<const BlockIQ4_XS*>(b), sub);
  return half_bits_to_float(load_u16(b + offsetof(BlockIQ4_XS, d))) * a.d *
         static_cast<float>(scale * s);
}

// The primary unit_dot: the legacy types, whose unit is one block.
template <DType T>
__device__ __forceinline__ float unit_dot(const uint8_t* seg, int j, const uint4 (&x)[2],
                                          ActBlock a) {
  using Block = typename BlockTraits<T>::Block;
  static_assert(BlockTraits<T>::kElems == kUnit, "a legacy type's unit is its block");
  return legacy_unit_dot<Block>(seg + j * static_cast<int>(sizeof(Block)), x, a);
}

// Sub-block sub (0..7) of a q2_k block: the 2-bit codes (qs[32 (sub / 4) + l] >> 2 (sub % 4)) & 3,
// a 4-bit scale and min per 16 elements (scales[2 sub], scales[2 sub + 1]): x = d * scale * q -
// dmin * min.
template <>
__device__ __forceinline__ float unit_dot<DType::Q2_K>(const uint8_t* seg, int j,
                                                       const uint4 (&x)[2], ActBlock a) {
  const uint8_t* b = seg + (j / 8) * static_cast<int>(sizeof(BlockQ2_K));
  const int sub = j % 8, shift = 2 * (sub % 4);
  uint32_t q[8];
  load_words<8>(b + offsetof(BlockQ2_K, qs) + 32 * (sub / 4), q);
#pragma unroll
  for (int i = 0; i < 8; ++i) q[i] = (q[i] >> shift) & 0x03030303u;
  const uint32_t sc = load_u16(b + offsetof(BlockQ2_K, scales) + 2 * sub);
  const int sc0 = static_cast<int>(sc & 0xF), m0 = static_cast<int>((sc >> 4) & 0xF);
  const int sc1 = static_cast<int>((sc >> 8) & 0xF), m1 = static_cast<int>(sc >> 12);
  const int qx = sc0 * dp4a8(q, x, 0, 4) + sc1 * dp4a8(q, x, 4, 4);
  const int mx = m0 * a.s0 + m1 * a.s1;
  return a.d *
         (half_bits_to_float(load_u16(b + offsetof(BlockQ2_K, d))) * static_cast<float>(qx) -
          half_bits_to_float(load_u16(b + offsetof(BlockQ2_K, dmin))) * static_cast<float>(mx));
}

// Sub-block sub (0..7) of a q3_k block: the low two bits (qs[32 (sub / 4) + l] >> 2 (sub % 4)) & 3,
// the third bit (hmask[l] >> sub) & 1, the code those three bits minus 4, a signed 6-bit scale per
// 16 elements (q3k_scale_dev) and d per block.
template <>
__device__ __forceinline__ float unit_dot<DType::Q3_K>(const uint8_t* seg, int j,
                                                       const uint4 (&x)[2], ActBlock a) {
  const uint8_t* b = seg + (j / 8) * static_cast<int>(sizeof(BlockQ3_K));
  const int sub = j % 8, shift = 2 * (sub % 4);
  uint32_t q[8], hm[8];
  load_words<8>(b + offsetof(BlockQ3_K, qs) + 32 * (sub / 4), q);
  load_words<8>(b + offsetof(BlockQ3_K, hmask), hm);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    q[i] = ((q[i] >> shift) & 0x03030303u) | (((hm[i] >> sub) & 0x01010101u) << 2);
  const int s0 = dp4a8(q, x, 0, 4) - 4 * a.s0, s1 = dp4a8(q, x, 4, 4) - 4 * a.s1;
  const uint8_t* scales = b + offsetof(BlockQ3_K, scales);
  const int s = q3k_scale_dev(scales, 2 * sub) * s0 + q3k_scale_dev(scales, 2 * sub + 1) * s1;
  return half_bits_to_float(load_u16(b + offsetof(BlockQ3_K, d))) * a.d * static_cast<float>(s);
}

// The device helpers below use sm_90 instructions (bulk copies, mbarrier transactions); the
// staging kernel runs only there, and other architectures compile an empty kernel.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

// ---- bulk copies completing on an mbarrier (sm_90) ----

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The one arrival of this phase, announcing `bytes` of copies that complete it.
__device__ __forceinline__ void mbar_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
}

// `bytes` (a multiple of 16) from 16-byte aligned global `src` to 16-byte aligned shared `dst`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

#endif  // sm_90

template <DType T>
struct Seg {
  using B = BlockTraits<T>;
  static constexpr int kBytes = kSegElems / B::kElems * B::kBytes;  // a multiple of 16
  // The segment after its row's 16-byte phase (<= 14 bytes), the copy's rounding up to 16 bytes,
  // and the word load_words reads past the end of a unit.
  static constexpr int kBuf = kBytes + 32;
  // Rows a thread, and blocks per SM the registers are sized for: two rows take 64 registers (four
  // blocks). q3_k's unit holds its low and high bits at once: with two rows (three blocks, 85
  // registers) it ran no faster than with one, at six blocks (40 registers; at the 32 of eight
  // it spilled; docs/PERFORMANCE.md, "Measured choices").
  static constexpr int kThreadRows = T == DType::Q3_K ? 1 : ::ts::cuda::kThreadRows;
  static constexpr int kBlockRows = kRows * kThreadRows;
  static constexpr int kBlocks = T == DType::Q3_K ? 6 : kBlocksPerSm / kThreadRows;
  // As many stages as fit a block's share of shared memory and the static limit, up to 6 (2 for
  // q8_0, 3 for q6_k, 6 for q2_k).
  static constexpr int kSmem = 228 * 1024 / kBlocks - 1024 - 64 < kStaticSmem - 1024
                                   ? 228 * 1024 / kBlocks - 1024 - 64
                                   : kStaticSmem - 1024;
  static constexpr int kStages = kSmem / (kBlockRows * kBuf) < 6 ? kSmem / (kBlockRows * kBuf) : 6;
  static_assert(kBytes % 16 == 0, "segments must keep the row's 16-byte phase");
  static_assert(kStages >= 2, "a segment must be in flight while another is used");
};

template <DType T>
__global__ void __launch_bounds__(kThreads, Seg<T>::kBlocks)
    gemv_int8_kernel(const uint8_t* w, size_t row_stride, int64_t rows, int64_t cols,
                     const int8_t* xq, const ActBlock* meta, float* y, ExpertIndex ix) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using S = Seg<T>;
  constexpr int kStages = S::kStages, kStagedRows = S::kBlockRows, kRowsEach = S::kThreadRows;
  __shared__ __align__(16) uint8_t stage[kStages][kStagedRows][S::kBuf];
  __shared__ __align__(8) uint64_t bar[kStages];
  __shared__ float part[kRowsEach][kThreads / 32];
  const int tid = threadIdx.x;
  // The next matmul's quantisation kernel may be scheduled now; it waits for this grid to end.
  pdl_launch_dependents();
  if (ix.table != nullptr) {
    // The expert ids come from the kernels ahead: wait for them before picking the weight (the
    // weight copies then no longer overlap the quantisation).
    pdl_wait();
    w = static_cast<const uint8_t*>(ix.table[ix.ids[blockIdx.y]]);
    xq += expert_x_offset(ix);
    meta += expert_x_offset(ix) / kUnit;
    y += blockIdx.y * rows;
  }
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kStagedRows;
  const int nr = static_cast<int>(min(static_cast<int64_t>(kStagedRows), rows - r0));
  const int64_t row_bytes = cols / S::B::kElems * S::B::kBytes;
  const int nseg = static_cast<int>((cols + kSegElems - 1) / kSegElems);

  // Thread 0 copies segment s of every row into stage s % kStages.
  auto issue = [&](int s) {
    uint64_t* b = &bar[s % kStages];
    const uint8_t* src[kStagedRows] = {};
    uint32_t bytes[kStagedRows] = {};
    uint32_t total = 0;
#pragma unroll
    for (int r = 0; r < kStagedRows; ++r) {
      if (r >= nr) break;
      const uint8_t* row = w + (r0 + r) * row_stride;
      const uint8_t* start = row + static_cast<int64_t>(s) * S::kBytes;
      const uint8_t* end = row + min(static_cast<int64_t>(s + 1) * S::kBytes, row_bytes);
      src[r] = start - (reinterpret_cast<uintptr_t>(start) & 15);
      bytes[r] = static_cast<uint32_t>((end - src[r] + 15) / 16 * 16);
      total += bytes[r];
    }
    mbar_expect(b, total);
#pragma unroll
    for (int r = 0; r < kStagedRows; ++r)
      if (r < nr) bulk_copy(stage[s % kStages][r], src[r], bytes[r], b);
  };

  if (tid == 0) {
    for (int i = 0; i < kStages; ++i) mbar_init(&bar[i]);
    mbar_init_fence();
  }
  __syncthreads();
  if (tid == 0)
    for (int s = 0; s < min(kStages, nseg); ++s) issue(s);
  // Launched as a programmatic dependent of the quantisation kernel: the weight copies above
  // start while it runs; its int8 activations are read only after this wait.
  pdl_wait();

  // This thread's rows: set, set + kRows, ...; unit j of each segment of them.
  const int set = tid / (kThreads / kRows), j = tid % (kThreads / kRows);
  int phase[kRowsEach];  // where each row's bytes start in its stage buffer: its 16-byte phase
#pragma unroll
  for (int i = 0; i < kRowsEach; ++i) {
    const int r = set + i * kRows;
    phase[i] =
        r < nr ? static_cast<int>(reinterpret_cast<uintptr_t>(w + (r0 + r) * row_stride) & 15) : 0;
  }
  float acc[kRowsEach] = {};
  for (int s = 0; s < nseg; ++s) {
    const int64_t e = static_cast<int64_t>(s) * kSegElems + static_cast<int64_t>(j) * kUnit;
    uint4 x[2] = {};
    ActBlock a{};
    const bool active = set < nr && e < cols;
    if (active) {  // the activations first: their loads overlap the wait
      const auto* x4 = reinterpret_cast<const uint4*>(xq + e);
      x[0] = __ldg(x4);
      x[1] = __ldg(x4 + 1);
      const int2 m = __ldg(reinterpret_cast<const int2*>(meta + e / kUnit));
      a = *reinterpret_cast<const ActBlock*>(&m);
    }
    mbar_wait(&bar[s % kStages], static_cast<uint32_t>((s / kStages) & 1));
#pragma unroll
    for (int i = 0; i < kRowsEach; ++i)
      if (active && set + i * kRows < nr)
        acc[i] += unit_dot<T>(stage[s % kStages][set + i * kRows] + phase[i], j, x, a);
    __syncthreads();  // every thread is done with this stage before it is refilled
    if (tid == 0 && s + kStages < nseg) issue(s + kStages);
  }

#pragma unroll
  for (int i = 0; i < kRowsEach; ++i) {
    for (int off = 16; off > 0; off >>= 1) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], off);
    if (tid % 32 == 0) part[i][tid / 32] = acc[i];
  }
  __syncthreads();
  constexpr int kWarpsPerRow = kThreads / kRows / 32;
  if (tid < nr) {
    const int i = tid / kRows, rs = tid % kRows;
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kWarpsPerRow; ++k) sum += part[i][rs * kWarpsPerRow + k];
    y[r0 + tid] = sum;
  }
#else
  __trap();  // launched only on sm_90 and later (gemv_int8_supported)
#endif
}

// ---- direct loads: units on 16-byte boundaries ----

// How the direct kernel reads one row's units of Units::kElems elements: load(u) fetches what
// unit u's dot needs from memory (streamed: read once, evict first), acts(u) unit u's activations
// (read once for all the rows a thread takes), dot() then uses both.

// The activations of a 32-element unit: its 32 int8 codes and its block term.
struct UnitActs {
  uint4 x[2];
  ActBlock a;
};
__device__ __forceinline__ UnitActs unit_acts(int64_t u, const int8_t* xq, const ActBlock* meta) {
  const auto* x4 = reinterpret_cast<const uint4*>(xq + u * kUnit);
  const int2 m = __ldg(reinterpret_cast<const int2*>(meta + u));
  return {{__ldg(x4), __ldg(x4 + 1)}, *reinterpret_cast<const ActBlock*>(&m)};
}

// q8_0 in WeightLayout::Q8Groups: 32 codes (two 16-byte vectors) and one f16 scale.
struct Q8GroupUnits {
  struct Held {
    uint4 q[2];
    __half d;
  };
  static constexpr int kElems = kUnit;
  static constexpr bool kFitLanes = false;  // gemv_int8_kernel's lanes, for its bits
  static constexpr bool kWholeBlocks = kRows == kQ8GroupRows;  // rows come in whole groups
  // Two rows a thread need 48 registers: five blocks per SM (at 40, six, the kernel spilled).
  static constexpr int kBlocks = 5, kBlocksIndexed = 5, kBlocksBatched = 4;
  const uint4* codes;
  const __half* scales;
  Q8GroupUnits() = default;
  // Row r of the group at row r0 (a multiple of kQ8GroupRows).
  __device__ Q8GroupUnits(const uint8_t* w, size_t row_stride, int64_t cols, int64_t r0, int r)
      : codes(reinterpret_cast<const uint4*>(w + r0 * row_stride + r * cols)),
        scales(reinterpret_cast<const __half*>(w + r0 * row_stride + kQ8GroupRows * cols) +
               r * (cols / kUnit)) {}
  __device__ Held load(int64_t u) const {
    return {{__ldcs(codes + 2 * u), __ldcs(codes + 2 * u + 1)}, __ldcs(scales + u)};
  }
  using Acts = UnitActs;
  __device__ static Acts acts(int64_t u, const int8_t* xq, const ActBlock* meta) {
    return unit_acts(u, xq, meta);
  }
  // unit_dot<Q8_0>'s sum and product, in its order.
  __device__ static float dot(const Held& h, const Acts& x, int64_t /*u*/) {
    const uint32_t q[8] = {h.q[0].x, h.q[0].y, h.q[0].z, h.q[0].w,
                           h.q[1].x, h.q[1].y, h.q[1].z, h.q[1].w};
    return __half2float(h.d) * x.a.d * static_cast<float>(dp4a8(q, x.x, 0, 8));
  }
};

// q4_k and q5_k rows on 16-byte boundaries, 64 elements a unit: unit u is the pair of sub-blocks
// (2c, 2c + 1) of block u / 4, c = u % 4, whose elements are the low and the high nibbles of the
// same 32 bytes of qs (two 16-byte vectors), q5_k's fifth bits being bits 2c and 2c + 1 of its 32
// qh bytes (two more vectors, shared by the block's 4 units); their scales lie in the block's first
// 16 bytes (d, dmin, the 12 packed scale bytes), which the 4 units of a block, adjacent lanes of a
// warp, load together. A pair per thread rather than a sub-block reads each byte of qs once, and
// decodes the block's header once for two sub-blocks: these GEMVs are bound by their instructions,
// not their bytes.
struct KMinHeld {
  uint4 q[2];
  uint4 head;
};
struct KMinHeldQh : KMinHeld {
  uint4 qh[2];
};

template <DType T>
struct KMinUnits {
  static constexpr bool kFifthBit = T == DType::Q5_K;
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  using Held = std::conditional_t<kFifthBit, KMinHeldQh, KMinHeld>;
  static_assert(offsetof(Block, scales) == 4 && offsetof(Block, qs) % 16 == 0,
                "the block's first 16 bytes hold d, dmin and the scales");
  static constexpr int kElems = 64;
  // No other kernel has to give these bits: short rows take fewer lanes (gemv_direct_kernel).
  static constexpr bool kFitLanes = true;
  static constexpr bool kWholeBlocks = false;
  // A q4_k unit holds 12 registers (q8_0: 9), a q5_k unit 20: with two rows a thread, four blocks
  // per SM (64 registers) and three (80).
  static constexpr int kBlocks = kFifthBit ? 3 : 4, kBlocksIndexed = kBlocks, kBlocksBatched = 2;
  const uint8_t* row;
  KMinUnits() = default;
  __device__ KMinUnits(const uint8_t* w, size_t row_stride, int64_t /*cols*/, int64_t r0, int r)
      : row(w + (r0 + r) * row_stride) {}
  __device__ Held load(int64_t u) const {
    const uint8_t* b = row + (u / 4) * static_cast<int64_t>(sizeof(Block));
    const auto* qs = reinterpret_cast<const uint4*>(b + offsetof(Block, qs) + 32 * (u % 4));
    Held h;
    h.q[0] = __ldcs(qs);
    h.q[1] = __ldcs(qs + 1);
    h.head = __ldcs(reinterpret_cast<const uint4*>(b));
    if constexpr (kFifthBit) {
      const auto* qh = reinterpret_cast<const uint4*>(b + offsetof(Block, qh));
      h.qh[0] = __ldcs(qh);
      h.qh[1] = __ldcs(qh + 1);
    }
    return h;
  }
  // A unit's 64 activations: two 32-element blocks.
  struct Acts {
    uint4 xlo[2], xhi[2];
    ActBlock a[2];
  };
  __device__ static Acts acts(int64_t u, const int8_t* xq, const ActBlock* meta) {
    const auto* x4 = reinterpret_cast<const uint4*>(xq + u * kElems);
    const int4 m = __ldg(reinterpret_cast<const int4*>(meta + 2 * u));
    return {{__ldg(x4), __ldg(x4 + 1)},
            {__ldg(x4 + 2), __ldg(x4 + 3)},
            {*reinterpret_cast<const ActBlock*>(&m.x), *reinterpret_cast<const ActBlock*>(&m.z)}};
  }
  __device__ static float dot(const Held& h, const Acts& x, int64_t u) {
    const uint4(&xlo)[2] = x.xlo;
    const uint4(&xhi)[2] = x.xhi;
    const ActBlock(&a)[2] = x.a;
    const int c = static_cast<int>(u % 4);
    const uint32_t q[8] = {h.q[0].x, h.q[0].y, h.q[0].z, h.q[0].w,
                           h.q[1].x, h.q[1].y, h.q[1].z, h.q[1].w};
    uint32_t lo[8], hi[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) lo[i] = q[i] & 0x0F0F0F0Fu, hi[i] = (q[i] >> 4) & 0x0F0F0F0Fu;
    if constexpr (kFifthBit) {
      const uint32_t qh[8] = {h.qh[0].x, h.qh[0].y, h.qh[0].z, h.qh[0].w,
                              h.qh[1].x, h.qh[1].y, h.qh[1].z, h.qh[1].w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        lo[i] |= ((qh[i] >> (2 * c)) & 0x01010101u) << 4;
        hi[i] |= ((qh[i] >> (2 * c + 1)) & 0x01010101u) << 4;
      }
    }
    const int s[2] = {dp4a8(lo, xlo, 0, 8), dp4a8(hi, xhi, 0, 8)};
    int sc[2], mn[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) k4_scale_min_head(h.head, c * 2 + k, sc[k], mn[k]);
    const float d = half_bits_to_float(static_cast<uint16_t>(h.head.x & 0xFFFFu));
    const float dmin = half_bits_to_float(static_cast<uint16_t>(h.head.x >> 16));
    // Each sub-block: d * scale * sum(q x) - dmin * min * sum(x), in units of its activation scale.
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 2; ++k)
      sum += a[k].d * (d * static_cast<float>(sc[k] * s[k]) -
                       dmin * static_cast<float>(mn[k] * (a[k].s0 + a[k].s1)));
    return sum;
  }
};

// q6_k in WeightLayout::Q6Rows (q6_rows.cuh), 32 elements a unit: gemv_int8_kernel's units in its
// order, so the file's layout (on sm_90) and the packed rows give the same bits, and streamed
// experts (the file's layout) give the bits of resident ones. Unit u is sub-block u % 8 of block
// u / 8: its 32 bytes of ql and its 32 of qh (two 16-byte vectors each), its two scale bytes and
// its block's d. Adjacent lanes share the ql and qh vectors (two and four sub-blocks read the
// same bytes), which a warp's loads fetch once.
struct Q6KUnits {
  struct Held {
    uint4 ql[2], qh[2];
    uint32_t scales_d;  // the scale bytes in the low half, d's bits in the high half
  };
  static constexpr int kElems = kUnit;
  static constexpr bool kFitLanes = false;  // gemv_int8_kernel's lanes, for its bits
  static constexpr bool kWholeBlocks = false;
  // A unit holds 17 registers (q4_k: 12; scales and d held apart, 18, spilled): with two rows a
  // thread, four blocks per SM (64 registers).
  static constexpr int kBlocks = 4, kBlocksIndexed = 4, kBlocksBatched = 4;
  Q6PackedRow row;
  Q6KUnits() = default;
  __device__ Q6KUnits(const uint8_t* w, size_t row_stride, int64_t cols, int64_t r0, int r)
      : row(q6_packed_row(w, row_stride, cols, r0 + r)) {}
  __device__ Held load(int64_t u) const {
    const uint8_t* b = row.body + u / 8 * kQ6Body;
    const int sub = static_cast<int>(u % 8), h = sub / 4;
    const auto* ql =
        reinterpret_cast<const uint4*>(b + offsetof(BlockQ6_K, ql) + 64 * h + 32 * (sub % 2));
    const auto* qh = reinterpret_cast<const uint4*>(b + offsetof(BlockQ6_K, qh) + 32 * h);
    const auto* sc = reinterpret_cast<const unsigned short*>(b + offsetof(BlockQ6_K, scales));
    const auto* d = reinterpret_cast<const unsigned short*>(row.d());
    return {{__ldcs(ql), __ldcs(ql + 1)},
            {__ldcs(qh), __ldcs(qh + 1)},
            static_cast<uint32_t>(__ldcs(sc + sub)) | static_cast<uint32_t>(__ldcs(d + u / 8))
                                                          << 16};
  }
  using Acts = UnitActs;
  __device__ static Acts acts(int64_t u, const int8_t* xq, const ActBlock* meta) {
    return unit_acts(u, xq, meta);
  }
  __device__ static float dot(const Held& h, const Acts& x, int64_t u) {
    uint32_t lo[8] = {h.ql[0].x, h.ql[0].y, h.ql[0].z, h.ql[0].w,
                      h.ql[1].x, h.ql[1].y, h.ql[1].z, h.ql[1].w};
    const uint32_t hi[8] = {h.qh[0].x, h.qh[0].y, h.qh[0].z, h.qh[0].w,
                            h.qh[1].x, h.qh[1].y, h.qh[1].z, h.qh[1].w};
    // Scale byte 2 sub is the low byte of its word (little endian), 2 sub + 1 the next.
    const int sc0 = static_cast<int8_t>(h.scales_d & 0xFFu);
    const int sc1 = static_cast<int8_t>((h.scales_d >> 8) & 0xFFu);
    return q6k_unit(lo, hi, static_cast<int>(u % 8), sc0, sc1,
                    static_cast<uint16_t>(h.scales_d >> 16), x.x, x.a);
  }
};

// One block per 4 row sets of kR rows (kR = kThreadRows for one activation row, else 1), 64
// threads a row set (kLanes), each taking units j, j + 64, ... of each of its rows (q8_0: the units
// of gemv_int8_kernel in its order, so the file's layout and the 4-row groups give the same bits).
// Rows of fewer units take 32 or 16 lanes, where the type allows it (Units::kFitLanes), and 8 or 16
// row sets a block: an MoE expert's rows (q4_k Qwen3-30B-A3B: 32 and 12 units) would otherwise
// leave half or more of the lanes idle; a row's lanes then sum in their warp, without shared
// memory. More units per thread on long rows was measured and not taken (16 lanes at 4096 columns
// ran slower). A thread's rows are a block's row sets apart, so that the lanes of a warp read one
// row's units side by side. Each unit's activations are loaded once for its kR rows: with a row a
// thread, the four rows of a block loaded them four times, and the q4_k GEMV was bound by its L1
// traffic rather than by HBM (ncu's L1 and DRAM throughput, before and after: docs/PERFORMANCE.md,
// "Measured choices"). A unit's bytes (Units::load) are held one unit ahead: the first unit's go
// out before the wait for the quantisation kernel ahead (weights are never written while kernels
// run), each next one as soon as a unit is done, so that no unit waits on more than one memory
// round trip. The blocks per SM (Units::kBlocks, at the registers two rows take) hide the rest.
//
// kX activation rows (a batched decode's tokens, quantised cols apart) share each unit's weight
// bytes and its decoding: both are paid once for all of them. Row m's sum takes its units in the
// order of a one-row launch, so each row gets the bits of its own decode. kX is at most
// kLaunchRows: the rows' sums and activations take registers, and such launches run at
// Units::kBlocksBatched blocks per SM, measured (docs/PERFORMANCE.md, "Measured choices"): q8_0 and
// q6_k at 4 (64 registers), q4_k and q5_k at 2 (up to 99; at 3 they spilled and ran slower). Extra
// rows then cost q8_0 and q6_k least and q4_k and q5_k more, since their per-row dot products
// and scale arithmetic, not their bytes, already bound the one-row GEMV.
// Rows a block of gemv_direct_kernel<.., kLanes, kX> takes: its row sets (threads / kLanes), each
// of kThreadRows rows for one activation row, else of one (the launch's grid follows it).
template <int kLanes, int kX>
constexpr int kDirectBlockRows = (kThreads / kLanes) * (kX == 1 ? kThreadRows : 1);

template <class Units, bool kIndexed, int kLanes, int kX>
__global__ void __launch_bounds__(kThreads, kX > 1     ? Units::kBlocksBatched
                                            : kIndexed ? Units::kBlocksIndexed
                                                       : Units::kBlocks)
    gemv_direct_kernel(const uint8_t* w, size_t row_stride, int64_t rows, int64_t cols,
                       const int8_t* xq, const ActBlock* meta, float* y, ExpertIndex ix) {
  constexpr int kSets = kThreads / kLanes;  // row sets of a block; a thread's rows are kSets apart
  constexpr int kBlockRows = kDirectBlockRows<kLanes, kX>;
  constexpr int kR = kBlockRows / kSets;
  static_assert(kSets == kRows || Units::kFitLanes, "the type keeps gemv_int8_kernel's lanes");
  static_assert(kX == 1 || !kIndexed, "an index gives each expert its own activation row");
  if constexpr (kIndexed) {  // the expert ids come from the kernels ahead: wait for them first
    pdl_wait();
    w = static_cast<const uint8_t*>(ix.table[ix.ids[blockIdx.y]]);
    xq += expert_x_offset(ix);
    meta += expert_x_offset(ix) / kUnit;
    y += blockIdx.y * rows;
  }
  const int tid = threadIdx.x;
  const int set = tid / kLanes, j = tid % kLanes;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  // Row i of this thread: r0 + i * kSets + set. Every row of a block is there when the layout
  // groups whole blocks of rows.
  bool live[kR];
  int64_t units = 0;
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    live[i] = (Units::kWholeBlocks && kR == 1) || r0 + i * kSets + set < rows;
    if (live[i]) units = cols / Units::kElems;
  }
  Units row[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) row[i] = Units(w, row_stride, cols, r0 + i * kSets, set);
  typename Units::Held held[kR]{};
#pragma unroll
  for (int i = 0; i < kR; ++i)
    if (j < units && live[i]) held[i] = row[i].load(j);
  pdl_enter();
  float acc[kX][kR] = {};
  for (int64_t u = j; u < units; u += kLanes) {
#pragma unroll
    for (int m = 0; m < kX; ++m) {
      const typename Units::Acts x = Units::acts(u, xq + m * cols, meta + m * cols / kUnit);
#pragma unroll
      for (int i = 0; i < kR; ++i) acc[m][i] += Units::dot(held[i], x, u);
    }
    if (u + kLanes < units) {
#pragma unroll
      for (int i = 0; i < kR; ++i)
        if (live[i]) held[i] = row[i].load(u + kLanes);
    }
  }
  if constexpr (kLanes <= 32) {  // a row's lanes are in one warp
#pragma unroll
    for (int m = 0; m < kX; ++m)
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        for (int off = kLanes / 2; off > 0; off >>= 1)
          acc[m][i] += __shfl_xor_sync(0xffffffffu, acc[m][i], off);
        if (j == 0 && live[i]) y[m * rows + r0 + i * kSets + set] = acc[m][i];
      }
  } else {
    __shared__ float part[kX][kR][kThreads / 32];
#pragma unroll
    for (int m = 0; m < kX; ++m)
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        for (int off = 16; off > 0; off >>= 1)
          acc[m][i] += __shfl_xor_sync(0xffffffffu, acc[m][i], off);
        if (tid % 32 == 0) part[m][i][tid / 32] = acc[m][i];
      }
    __syncthreads();
    constexpr int kWarpsPerRow = kLanes / 32;
    if (tid < kBlockRows) {
      const int i = tid / kSets, rs = tid % kSets;
      if ((Units::kWholeBlocks && kR == 1) || r0 + tid < rows) {
#pragma unroll
        for (int m = 0; m < kX; ++m) {
          float sum = 0.0f;
#pragma unroll
          for (int k = 0; k < kWarpsPerRow; ++k) sum += part[m][i][rs * kWarpsPerRow + k];
          y[m * rows + r0 + tid] = sum;
        }
      }
    }
  }
}

// Blocks of `block_rows` rows over w, for each expert of an index.
dim3 gemv_grid(const Weight& w, int64_t block_rows, const ExpertIndex& ix) {
  return {static_cast<unsigned>((w.rows + block_rows - 1) / block_rows),
          static_cast<unsigned>(ix.table != nullptr ? ix.n : 1)};
}

template <DType T>
void launch_int8(cudaStream_t stream, const uint8_t* data, const Weight& w, const int8_t* q,
                 const ActBlock* meta, float* y, const ExpertIndex& ix) {
  // All of shared memory rather than the default split with L1, for Seg<T>::kBlocks a SM (set
  // once, on the device of the first launch).
  static const cudaError_t carveout =
      cudaFuncSetAttribute(gemv_int8_kernel<T>, cudaFuncAttributePreferredSharedMemoryCarveout,
                           cudaSharedmemCarveoutMaxShared);
  check(carveout, "int8 gemv shared memory carveout");
  launch("int8 gemv", gemv_int8_kernel<T>, gemv_grid(w, Seg<T>::kBlockRows, ix), kThreads, 0,
         stream, data, w.row_stride, w.rows, w.cols, q, meta, y, ix);
}

// The types gemv_int8_kernel reads (unit_dot<T>), in the file's layout.
template <DType... Ts>
struct TypeList {};
using StagedTypes = TypeList<DType::Q8_0, DType::Q6_K, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                             DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS>;

template <DType... Ts>
bool staged(TypeList<Ts...> /*types*/, DType t) {
  return ((t == Ts) || ...);
}

template <DType... Ts>
void launch_staged(TypeList<Ts...> /*types*/, cudaStream_t stream, const uint8_t* data,
                   const Weight& w, const int8_t* q, const ActBlock* meta, float* y,
                   const ExpertIndex& ix) {
  const bool launched =
      ((w.dtype == Ts && (launch_int8<Ts>(stream, data, w, q, meta, y, ix), true)) || ...);
  if (!launched)
    fail(ErrorKind::Unsupported,
         std::string("int8 GEMV: weight type ") + dtype_name(w.dtype) + " has no kernel");
}

// q4_k / q5_k rows whose blocks all start on 16-byte boundaries (gemv_direct_kernel's loads).
bool kmin_direct(const Weight& w) {
  return (w.dtype == DType::Q4_K || w.dtype == DType::Q5_K) && w.layout == WeightLayout::Rows &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && w.row_stride % 16 == 0;
}

// Weights whose units lie on 16-byte boundaries: gemv_direct_kernel reads them, on every
// architecture and for up to kLaunchRows activation rows a launch.
bool direct_layout(const Weight& w) {
  return w.layout == WeightLayout::Q8Groups || w.layout == WeightLayout::Q6Rows || kmin_direct(w);
}

template <class Units, int kLanes, int kX>
void launch_direct_lanes(cudaStream_t stream, const uint8_t* data, const Weight& w, const int8_t* q,
                         const ActBlock* meta, float* y, const ExpertIndex& ix) {
  launch("int8 gemv (direct)",
         ix.table != nullptr ? gemv_direct_kernel<Units, true, kLanes, 1>
                             : gemv_direct_kernel<Units, false, kLanes, kX>,
         gemv_grid(w, kDirectBlockRows<kLanes, kX>, ix), kThreads, 0, stream, data, w.row_stride,
         w.rows, w.cols, q, meta, y, ix);
}

template <class Units, int kX>
void launch_direct_rows(cudaStream_t stream, const uint8_t* data, const Weight& w, const int8_t* q,
                        const ActBlock* meta, float* y, const ExpertIndex& ix) {
  constexpr int kLanes = kThreads / kRows;
  if constexpr (Units::kFitLanes) {
    const int64_t units = w.cols / Units::kElems;
    if (units <= kLanes / 4)
      return launch_direct_lanes<Units, kLanes / 4, kX>(stream, data, w, q, meta, y, ix);
    if (units <= kLanes / 2)
      return launch_direct_lanes<Units, kLanes / 2, kX>(stream, data, w, q, meta, y, ix);
  }
  launch_direct_lanes<Units, kLanes, kX>(stream, data, w, q, meta, y, ix);
}

// The launches for x_rows activation rows (1..kGemvRows; 1 under an index): up to kLaunchRows a
// launch, the weights read once per launch.
template <class Units>
void launch_direct(cudaStream_t stream, const uint8_t* data, const Weight& w, int64_t x_rows,
                   const int8_t* q, const ActBlock* meta, float* y, const ExpertIndex& ix) {
  static_assert(kLaunchRows == 4, "one instantiation per row count");
  for (int64_t m = 0; m < x_rows; m += kLaunchRows) {
    const int8_t* qm = q + m * w.cols;
    const ActBlock* mm = meta + m * w.cols / kUnit;
    float* ym = y + m * w.rows;
    switch (std::min(x_rows - m, kLaunchRows)) {
      case 1:
        launch_direct_rows<Units, 1>(stream, data, w, qm, mm, ym, ix);
        break;
      case 2:
        launch_direct_rows<Units, 2>(stream, data, w, qm, mm, ym, ix);
        break;
      case 3:
        launch_direct_rows<Units, 3>(stream, data, w, qm, mm, ym, ix);
        break;
      default:
        launch_direct_rows<Units, 4>(stream, data, w, qm, mm, ym, ix);
    }
  }
}

}  // namespace

bool gemv_int8_supported(const Weight& w, int sm_major) {
  if (direct_layout(w)) return true;
  // q4_k / q5_k rows off 16-byte boundaries (a view at an odd offset) take the f32 GEMV.
  return sm_major >= 9 && staged(StagedTypes{}, w.dtype) && w.cols % kUnit == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 2 == 0 && w.row_stride % 2 == 0;
}

int64_t gemv_int8_max_rows(const Weight& w) {
  return direct_layout(w) ? kGemvRows : kLaunchRows;
}

// Every input row is quantised: the M rows, or those of an index with its own row per expert or
// per run of experts_per_x.
int64_t gemv_int8_input_rows(int64_t M, const ExpertIndex& ix) {
  return ix.table != nullptr && ix.x_stride != 0 ? ix.n / ix.experts_per_x : M;
}

size_t gemv_int8_scratch_bytes(int64_t cols) {
  return act_codes_bytes(cols) + static_cast<size_t>(cols / kUnit) * sizeof(ActBlock);
}

void launch_gemv_int8(const Weight& w, const float* x, int64_t M, float* y, void* scratch,
                      bool quantised, cudaStream_t stream, const ExpertIndex& ix) {
  if (ix.x_stride != 0 && ix.x_stride != w.cols)
    fail(ErrorKind::Unsupported, "int8 GEMV: indexed input rows must be " + std::to_string(w.cols) +
                                     " apart, not " + std::to_string(ix.x_stride));
  if (M < 1 || M > gemv_int8_max_rows(w) || (M > 1 && ix.table != nullptr))
    fail(ErrorKind::Unsupported, "int8 GEMV: " + std::to_string(M) + " activation rows (1 to " +
                                     std::to_string(gemv_int8_max_rows(w)) +
                                     ", 1 under an expert index)");
  const int64_t x_rows = gemv_int8_input_rows(M, ix);
  const ActsView acts = acts_view(scratch, w.cols * x_rows);
  int8_t* q = acts.q;
  ActBlock* meta = acts.meta;
  const int64_t blocks = w.cols * x_rows / kUnit;
  // Both kernels are programmatic dependent launches (pdl.cuh): the GEMV's weight copies start
  // while the activations are quantised (or while the kernel that wrote them quantised does).
  if (!quantised)
    launch("int8 activations", quantize_acts_kernel,
           dim3(static_cast<unsigned>((blocks + kThreads / 32 - 1) / (kThreads / 32))), kThreads, 0,
           stream, x, blocks, acts);
  const auto* data = static_cast<const uint8_t*>(w.data);
  if (w.layout == WeightLayout::Q8Groups)
    return launch_direct<Q8GroupUnits>(stream, data, w, M, q, meta, y, ix);
  if (w.layout == WeightLayout::Q6Rows)
    return launch_direct<Q6KUnits>(stream, data, w, M, q, meta, y, ix);
  if (kmin_direct(w))
    return w.dtype == DType::Q4_K
               ? launch_direct<KMinUnits<DType::Q4_K>>(stream, data, w, M, q, meta, y, ix)
               : launch_direct<KMinUnits<DType::Q5_K>>(stream, data, w, M, q, meta, y, ix);
  // The staged kernel reads one activation row: a launch per row, each after the one before.
  for (int64_t m = 0; m < M; ++m)
    launch_staged(StagedTypes{}, stream, data, w, q + m * w.cols, meta + m * w.cols / kUnit,
                  y + m * w.rows, ix);
}

}  // namespace ts::cuda
