// Decode GEMV (one activation row): y[r] = dot(W row r, x). Memory-bound: the goal is to stream the
// weight bytes at the HBM rate, so every weight byte is loaded once, 16 bytes per thread, coalesced
// across the warp, with several loads in flight per thread.
//
// One block of 256 threads takes 4 rows and splits their columns between its threads: each thread
// loads a piece of x once and uses it for the 4 rows, so that the L1 traffic of x (4 bytes per
// element, against 0.5..2 bytes of weight) is a quarter of the weight traffic, not a multiple of
// it. The per-thread sums of each row meet through shared memory at the end.
//
// Plain types (f32/f16/bf16) load 16-byte chunks of each row straight into registers. The GGML
// block types have blocks of 18..210 bytes that do not line up with 16-byte chunks, so the block
// copies a segment (2048 elements) of each of its rows into shared memory with 16-byte cp.async
// copies, double-buffered so that the next segment is in flight while this one is decoded; each
// thread then decodes 8 consecutive elements of each row, so that the reads of x are coalesced.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "backend/cuda/expert_index.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_device.cuh"
#include "backend/cuda/warp.cuh"
#include "core/error.h"

namespace ts::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 4;  // rows per block

// Sums each row's per-thread partials over the block and writes rows r0 .. r0 + nr - 1 of y.
__device__ __forceinline__ void finish_rows(const float (&acc)[kRows], int nr, int64_t r0,
                                            float* y) {
  __shared__ float part[kWarps][kRows];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float s = warp_sum(acc[r]);
    if (lane == 0) part[warp][r] = s;
  }
  __syncthreads();
  if (threadIdx.x < nr) {
    float s = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += part[w][threadIdx.x];
    y[r0 + threadIdx.x] = s;
  }
}

// The start of every GEMV kernel: waits for the kernels ahead (pdl.cuh); under an index, GEMV
// blockIdx.y then takes its expert's weight, its input row and its output row. (Asking L2 for the
// block's weight rows before the wait measured slower: docs/PERFORMANCE.md, "Measured choices".)
__device__ __forceinline__ void gemv_enter(const ExpertIndex& ix, int64_t rows, const uint8_t*& w,
                                           const float*& x, float*& y) {
  pdl_enter();
  if (ix.table == nullptr) return;
  w = static_cast<const uint8_t*>(ix.table[ix.ids[blockIdx.y]]);
  x += expert_x_offset(ix);
  y += blockIdx.y * rows;
}

// ---- plain types ----

constexpr int kPlainUnroll = 2;  // chunks per row per step: 2 x 4 rows = 8 16-byte loads in flight
// Rows of at most this many 16-byte chunks take a warp per kRows rows (see gemv_plain_kernel).
constexpr int64_t kWarpRowChunks = 128;
constexpr int64_t kWarpRowsPerBlock = kRows * kWarps;

template <DType T>
__device__ __forceinline__ void unpack_chunk(uint4 v, float* w) {
  if constexpr (T == DType::F32) {
    w[0] = __uint_as_float(v.x), w[1] = __uint_as_float(v.y), w[2] = __uint_as_float(v.z);
    w[3] = __uint_as_float(v.w);
  } else {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const auto lo = static_cast<uint16_t>(words[k] & 0xFFFF),
                 hi = static_cast<uint16_t>(words[k] >> 16);
      if constexpr (T == DType::F16) {
        w[2 * k] = half_bits_to_float(lo), w[2 * k + 1] = half_bits_to_float(hi);
      } else {
        w[2 * k] = bf16_bits_to_float(lo), w[2 * k + 1] = bf16_bits_to_float(hi);
      }
    }
  }
}

// Rows or activations that are not 16-byte aligned (padded rows, an offset into a buffer): one
// element per thread per step. Slower, but decode keeps f32 activations whatever the layout.
template <DType T>
__global__ void __launch_bounds__(kThreads)
    gemv_plain_scalar_kernel(const uint8_t* w, size_t row_stride, int64_t rows, int64_t cols,
                             const float* x, float* y, ExpertIndex ix) {
  gemv_enter(ix, rows, w, x, y);
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int nr = static_cast<int>(min(static_cast<int64_t>(kRows), rows - r0));
  float acc[kRows] = {};
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float xi = __ldg(x + i);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (r < nr) acc[r] += plain_elem<T>(w + (r0 + r) * row_stride, i) * xi;
  }
  finish_rows(acc, nr, r0, y);
}

// kGroup threads share each set of kRows rows: the whole block (the row's chunks spread over 256
// threads, partial sums meeting in shared memory), or one warp for rows of at most kWarpRowChunks
// chunks. Short rows (an MoE expert's down projection: 768 columns, 96 chunks) would leave most of
// a block idle and spend the kernel on block launches and barriers; a warp per row set has every
// lane loading and no barrier.
// kFill (expert paging, an index with fill entries): the chunks loaded are also stored at the same
// offset from the expert's fill address, when it has one: a weight read from host memory fills its
// slot as it goes. A template flag, not a runtime test: the extra address arithmetic in the load
// loop cost resident decode a fifth of its speed (docs/PERFORMANCE.md, "Measured choices").
// kEarly (no index): the rows are known before the wait for the kernel ahead and no kernel writes
// weights, so the first loads are issued before it, under that kernel's tail.
template <DType T, int kGroup, bool kFill, bool kEarly>
__global__ void __launch_bounds__(kThreads)
    gemv_plain_kernel(const uint8_t* w, size_t row_stride, int64_t rows, int64_t cols,
                      const float* x, float* y, ExpertIndex ix) {
  constexpr int kPerChunk = T == DType::F32 ? 4 : 8;  // elements per 16-byte chunk
  const int tid = static_cast<int>(threadIdx.x) % kGroup;
  const int64_t r0 =
      (static_cast<int64_t>(blockIdx.x) * (kThreads / kGroup) + threadIdx.x / kGroup) * kRows;
  const int nr = static_cast<int>(max(int64_t{0}, min(static_cast<int64_t>(kRows), rows - r0)));
  const int64_t nchunks = cols / kPerChunk;
  uint4 v[kPlainUnroll][kRows];
  const uint8_t* base = nullptr;
  uint8_t* fill = nullptr;
  const auto load = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < kPlainUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (r < nr && c0 + u * kGroup < nchunks) {  // streamed: read once, evict first
          v[u][r] = __ldcs(reinterpret_cast<const uint4*>(base + r * row_stride) + c0 + u * kGroup);
          if (kFill && fill != nullptr)
            __stcs(reinterpret_cast<uint4*>(fill + r * row_stride) + c0 + u * kGroup, v[u][r]);
        }
  };
  if constexpr (kEarly) {
    base = w + r0 * row_stride;
    load(tid);
  }
  gemv_enter(ix, rows, w, x, y);
  base = w + r0 * row_stride;
  if constexpr (kFill) {
    fill = static_cast<uint8_t*>(ix.fill[ix.ids[blockIdx.y]]);
    if (fill != nullptr) fill += r0 * row_stride;
  }
  float acc[kRows] = {};
  for (int64_t c0 = tid; c0 < nchunks; c0 += kGroup * kPlainUnroll) {
    if (!kEarly || c0 != tid) load(c0);
#pragma unroll
    for (int u = 0; u < kPlainUnroll; ++u) {
      const int64_t c = c0 + u * kGroup;
      if (c >= nchunks) break;
      float xv[kPerChunk];
      const auto* x4 = reinterpret_cast<const float4*>(x + c * kPerChunk);
#pragma unroll
      for (int k = 0; k < kPerChunk / 4; ++k) {
        const float4 a = __ldg(x4 + k);
        xv[4 * k] = a.x, xv[4 * k + 1] = a.y, xv[4 * k + 2] = a.z, xv[4 * k + 3] = a.w;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= nr) break;
        float wf[kPerChunk];
        unpack_chunk<T>(v[u][r], wf);
#pragma unroll
        for (int k = 0; k < kPerChunk; ++k) acc[r] = fmaf(wf[k], xv[k], acc[r]);
      }
    }
  }
  if constexpr (kGroup == kThreads) {
    finish_rows(acc, nr, r0, y);
  } else {
    static_assert(kGroup == 32, "a row set is the block or one warp");
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float sum = warp_sum(acc[r]);
      if (tid == 0 && r < nr) y[r0 + r] = sum;
    }
  }
}

// ---- block-quantised types ----

constexpr int kSegElems = kThreads * 8;  // elements per row per segment: 8 per thread

template <DType T>
struct SegGeometry {
  using B = BlockTraits<T>;
  static constexpr int kBytes = kSegElems / B::kElems * B::kBytes;
  // Room for the segment plus up to 15 bytes before it (aligned-down start) and after it.
  static constexpr int kBuf = (kBytes + 32 + 15) / 16 * 16;
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void cp_async_wait_one() {
  asm volatile("cp.async.wait_group 1;\n" ::);
}

template <DType T, bool kAlignedX>
__global__ void __launch_bounds__(kThreads)
    gemv_quant_kernel(const uint8_t* w, size_t row_stride, int64_t rows, int64_t cols,
                      const float* x, float* y, ExpertIndex ix) {
  using G = SegGeometry<T>;
  using B = BlockTraits<T>;
  gemv_enter(ix, rows, w, x, y);
  __shared__ __align__(16) uint8_t smem[2][kRows][G::kBuf];
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int nr = static_cast<int>(min(static_cast<int64_t>(kRows), rows - r0));
  const uint8_t* base = w + r0 * row_stride;
  const int64_t row_bytes = cols / B::kElems * B::kBytes;
  const int nseg = static_cast<int>((cols + kSegElems - 1) / kSegElems);

  // Copies segment s of every row into stage s % 2, in 16-byte chunks from an aligned-down start.
  auto issue = [&](int s) {
    for (int r = 0; r < nr; ++r) {
      const uint8_t* start = base + r * row_stride + static_cast<int64_t>(s) * G::kBytes;
      const uint8_t* end =
          base + r * row_stride + min(static_cast<int64_t>(s + 1) * G::kBytes, row_bytes);
      const auto* a0 =
          reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(start) & ~uintptr_t{15});
      const int nchunks = static_cast<int>((end - a0 + 15) / 16);
      for (int c = threadIdx.x; c < nchunks; c += kThreads)
        cp_async16(smem[s % 2][r] + 16 * c, a0 + 16 * c);
    }
  };

  float acc[kRows] = {};
  issue(0);
  cp_async_commit();
  for (int s = 0; s < nseg; ++s) {
    if (s + 1 < nseg) issue(s + 1);
    cp_async_commit();
    cp_async_wait_one();  // this thread's copies of segment s are done
    __syncthreads();      // ... and every other thread's
    const int64_t n_elems =
        min(static_cast<int64_t>(kSegElems), cols - static_cast<int64_t>(s) * kSegElems);
    const int e = threadIdx.x * 8;
    if (e < n_elems) {
      const float* xs = x + static_cast<int64_t>(s) * kSegElems + e;
      float xv[8];
      if constexpr (kAlignedX) {
        const auto* x4 = reinterpret_cast<const float4*>(xs);
        const float4 a = __ldg(x4), b = __ldg(x4 + 1);
        xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w;
        xv[4] = b.x, xv[5] = b.y, xv[6] = b.z, xv[7] = b.w;
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) xv[i] = __ldg(xs + i);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= nr) break;
        const uint8_t* start = base + r * row_stride + static_cast<int64_t>(s) * G::kBytes;
        const uint8_t* seg = smem[s % 2][r] + (reinterpret_cast<uintptr_t>(start) & 15);
        acc[r] += dot8<T>(seg + (e / B::kElems) * B::kBytes, e % B::kElems, xv);
      }
    }
    __syncthreads();  // every thread is done with this stage before segment s + 2 overwrites it
  }
  finish_rows(acc, nr, r0, y);
}

}  // namespace

bool gemv_loads_chunks(const Weight& w, const float* x, int64_t x_stride) {
  const int64_t per_chunk = w.dtype == DType::F32 ? 4 : 8;
  return is_plain(w.dtype) && reinterpret_cast<uintptr_t>(x) % 16 == 0 && x_stride % 4 == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && w.row_stride % 16 == 0 &&
         w.cols % per_chunk == 0;
}

namespace {
struct NoLaunch {
  template <DType>
  void operator()() const {}
};
}  // namespace

bool has_weight_kernels(DType t) {
  return dispatch_weight_type(t, NoLaunch{});
}

void launch_gemv(const Weight& w, const float* x, float* y, cudaStream_t stream,
                 const ExpertIndex& ix) {
  if (ix.fill != nullptr && !gemv_loads_chunks(w, x, ix.x_stride))
    fail(ErrorKind::Runtime, "internal: a GEMV asked to fill a layout it does not load whole");
  // Under an index every expert's weight lies like w.data (same offset in its slot).
  const auto addr = reinterpret_cast<uintptr_t>(w.data);
  const bool x_aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ix.x_stride % 4 == 0;
  const auto* data = static_cast<const uint8_t*>(w.data);
  const dim3 grid(static_cast<unsigned>((w.rows + kRows - 1) / kRows),
                  static_cast<unsigned>(ix.table != nullptr ? ix.n : 1));
  const bool known = dispatch_weight_type(w.dtype, [&]<DType T>() {
    if constexpr (is_plain(T)) {
      constexpr int kPerChunk = T == DType::F32 ? 4 : 8;
      const bool vector = gemv_loads_chunks(w, x, ix.x_stride);
      // The kernel for this index: filling slots, by id, or without an index (early loads).
      const auto pick = [&]<int kGroup>() {
        if (ix.fill != nullptr) return gemv_plain_kernel<T, kGroup, true, false>;
        if (ix.table != nullptr) return gemv_plain_kernel<T, kGroup, false, false>;
        return gemv_plain_kernel<T, kGroup, false, true>;
      };
      if (vector && w.cols / kPerChunk <= kWarpRowChunks) {
        const dim3 warp_grid(
            static_cast<unsigned>((w.rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock), grid.y);
        launch("gemv plain (warp rows)", pick.template operator()<32>(), warp_grid, kThreads, 0,
               stream, data, w.row_stride, w.rows, w.cols, x, y, ix);
      } else if (vector) {
        launch("gemv plain", pick.template operator()<kThreads>(), grid, kThreads, 0, stream, data,
               w.row_stride, w.rows, w.cols, x, y, ix);
      } else
        launch("gemv plain scalar", gemv_plain_scalar_kernel<T>, grid, kThreads, 0, stream, data,
               w.row_stride, w.rows, w.cols, x, y, ix);
    } else {
      constexpr int kAlign = weight_alignment(T);
      if (addr % kAlign != 0 || w.row_stride % kAlign != 0)
        fail(ErrorKind::Unsupported,
             std::string("matmul: ") + dtype_name(T) +
                 " weight rows must start at even addresses (16-bit scales)");
      if (x_aligned)
        launch("gemv quant", gemv_quant_kernel<T, true>, grid, kThreads, 0, stream, data,
               w.row_stride, w.rows, w.cols, x, y, ix);
      else
        launch("gemv quant", gemv_quant_kernel<T, false>, grid, kThreads, 0, stream, data,
               w.row_stride, w.rows, w.cols, x, y, ix);
    }
  });
  if (!known)
    fail(ErrorKind::Unsupported,
         std::string("matmul: weight type ") + dtype_name(w.dtype) + " has no CUDA kernel");
}

}  // namespace ts::cuda
