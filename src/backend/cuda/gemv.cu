// Decode GEMV (one activation row): y[r] = dot(W row r, x). Memory-bound: the goal is to stream the
// weight bytes at the HBM rate, so every weight byte is loaded once, 16 bytes per thread, coalesced
// across the warp, with several loads in flight per thread.
//
// Plain types (f32/f16/bf16) load 16-byte chunks of the row straight into registers. The GGML
// block types have blocks of 18..210 bytes that do not line up with 16-byte chunks, so a warp
// copies a segment of its row (~2 KB of whole blocks) into shared memory with 16-byte cp.async
// copies, double-buffered so that the next segment is in flight while this one is decoded; each
// lane then decodes 8 consecutive elements per 256-element group, so that the warp's reads of x
// are coalesced too.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_device.cuh"
#include "core/error.h"

namespace ts::cuda {
namespace {

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float dot_x4(float4 a, const float* w) {
  return a.x * w[0] + a.y * w[1] + a.z * w[2] + a.w * w[3];
}

// ---- plain types ----

constexpr int kPlainWarps = 8;
constexpr int kPlainUnroll = 8;  // 16-byte loads in flight per lane

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
// element per lane per step. Slower, but decode keeps f32 activations whatever the layout.
template <DType T>
__global__ void __launch_bounds__(kPlainWarps * 32)
    gemv_plain_scalar_kernel(const uint8_t* w, size_t row_stride, int64_t rows, int64_t cols,
                             const float* x, float* y) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kPlainWarps;
  for (int64_t r = blockIdx.x * kPlainWarps + threadIdx.x / 32; r < rows; r += warps) {
    const uint8_t* wr = w + r * row_stride;
    float acc = 0;
    for (int64_t i = lane; i < cols; i += 32) acc += plain_elem<T>(wr, i) * __ldg(x + i);
    acc = warp_sum(acc);
    if (lane == 0) y[r] = acc;
  }
}

template <DType T>
__global__ void __launch_bounds__(kPlainWarps * 32)
    gemv_plain_kernel(const uint8_t* w, size_t row_stride, int64_t rows, int64_t cols,
                      const float* x, float* y) {
  constexpr int kPerChunk = T == DType::F32 ? 4 : 8;  // elements per 16-byte chunk
  const int lane = threadIdx.x % 32;
  const int64_t nchunks = cols / kPerChunk;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kPlainWarps;
  for (int64_t r = blockIdx.x * kPlainWarps + threadIdx.x / 32; r < rows; r += warps) {
    const auto* wr = reinterpret_cast<const uint4*>(w + r * row_stride);
    float acc = 0;
    for (int64_t c0 = lane; c0 < nchunks; c0 += 32 * kPlainUnroll) {
      uint4 v[kPlainUnroll];
#pragma unroll
      for (int u = 0; u < kPlainUnroll; ++u)
        if (c0 + 32 * u < nchunks) v[u] = __ldcs(wr + c0 + 32 * u);  // streamed: read once
#pragma unroll
      for (int u = 0; u < kPlainUnroll; ++u) {
        const int64_t c = c0 + 32 * u;
        if (c >= nchunks) break;
        float wf[kPerChunk];
        unpack_chunk<T>(v[u], wf);
        const auto* xv = reinterpret_cast<const float4*>(x + c * kPerChunk);
#pragma unroll
        for (int k = 0; k < kPerChunk / 4; ++k) acc += dot_x4(__ldg(xv + k), wf + 4 * k);
      }
    }
    acc = warp_sum(acc);
    if (lane == 0) y[r] = acc;
  }
}

// ---- block-quantised types ----

constexpr int kQuantWarps = 4;
constexpr int kSegTarget = 2048;  // bytes of whole blocks per shared-memory segment

template <DType T>
struct SegGeometry {
  using B = BlockTraits<T>;
  static constexpr int kGroupBytes = (256 / B::kElems) * B::kBytes;  // one 256-element group
  static constexpr int kGroups = kSegTarget / kGroupBytes > 0 ? kSegTarget / kGroupBytes : 1;
  static constexpr int kElems = kGroups * 256;
  static constexpr int kBytes = kGroups * kGroupBytes;
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
__global__ void __launch_bounds__(kQuantWarps * 32)
    gemv_quant_kernel(const uint8_t* w, size_t row_stride, int64_t rows, int64_t cols,
                      const float* x, float* y) {
  using G = SegGeometry<T>;
  using B = BlockTraits<T>;
  __shared__ __align__(16) uint8_t smem[kQuantWarps][2][G::kBuf];
  const int lane = threadIdx.x % 32, wi = threadIdx.x / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kQuantWarps;
  const int64_t first = blockIdx.x * kQuantWarps + wi;
  const int64_t row_bytes = cols / B::kElems * B::kBytes;
  const int64_t nseg = (cols + G::kElems - 1) / G::kElems;
  const int64_t my_rows = first < rows ? (rows - first + warps - 1) / warps : 0;
  const int64_t tasks = my_rows * nseg;
  int offset0 = 0, offset1 = 0;  // where the segment starts inside each stage buffer

  // Copies task k's segment into stage k % 2 (16-byte chunks, aligned-down start).
  auto issue = [&](int64_t k) {
    const int64_t r = first + (k / nseg) * warps, s = k % nseg;
    const int64_t seg0 = s * G::kBytes;
    const int64_t seg1 = min(seg0 + static_cast<int64_t>(G::kBytes), row_bytes);
    const uint8_t* start = w + r * row_stride + seg0;
    const auto* a0 =
        reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(start) & ~uintptr_t{15});
    const uint8_t* end = w + r * row_stride + seg1;
    const int64_t nchunks = (end - a0 + 15) / 16;
    uint8_t* buf = smem[wi][k % 2];
    for (int64_t c = lane; c < nchunks; c += 32) cp_async16(buf + 16 * c, a0 + 16 * c);
    (k % 2 == 0 ? offset0 : offset1) = static_cast<int>(start - a0);
  };

  float acc = 0;
  if (tasks > 0) issue(0);
  cp_async_commit();
  for (int64_t k = 0; k < tasks; ++k) {
    if (k + 1 < tasks) issue(k + 1);
    cp_async_commit();
    cp_async_wait_one();  // task k's copies (this lane's) are done
    __syncwarp();         // ... and every other lane's
    const int64_t s = k % nseg;
    const int64_t n_elems = min(static_cast<int64_t>(G::kElems), cols - s * G::kElems);
    const uint8_t* seg = smem[wi][k % 2] + (k % 2 == 0 ? offset0 : offset1);
    const float* xs = x + s * G::kElems;
#pragma unroll
    for (int g = 0; g < G::kGroups; ++g) {
      const int e = g * 256 + lane * 8;
      if (e < n_elems) {
        float xv[8];
        if constexpr (kAlignedX) {
          const auto* x4 = reinterpret_cast<const float4*>(xs + e);
          const float4 a = __ldg(x4), b = __ldg(x4 + 1);
          xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w;
          xv[4] = b.x, xv[5] = b.y, xv[6] = b.z, xv[7] = b.w;
        } else {
#pragma unroll
          for (int i = 0; i < 8; ++i) xv[i] = __ldg(xs + e + i);
        }
        acc += dot8<T>(seg + (e / B::kElems) * B::kBytes, e % B::kElems, xv);
      }
    }
    if (s == nseg - 1) {
      acc = warp_sum(acc);
      if (lane == 0) y[first + (k / nseg) * warps] = acc;
      acc = 0;
    }
    __syncwarp();  // every lane is done with this stage before task k + 2 overwrites it
  }
}

unsigned grid_blocks(int64_t rows, int warps_per_block, int sm_count, int blocks_per_sm) {
  const int64_t needed = (rows + warps_per_block - 1) / warps_per_block;
  return static_cast<unsigned>(
      std::clamp<int64_t>(needed, 1, static_cast<int64_t>(sm_count) * blocks_per_sm));
}

}  // namespace

void launch_gemv(const Weight& w, const float* x, float* y, int sm_count, cudaStream_t stream) {
  const auto addr = reinterpret_cast<uintptr_t>(w.data);
  const bool x_aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  const auto* data = static_cast<const uint8_t*>(w.data);
  const bool known = dispatch_weight_type(w.dtype, [&]<DType T>() {
    if constexpr (is_plain(T)) {
      constexpr int kPerChunk = T == DType::F32 ? 4 : 8;
      const unsigned grid = grid_blocks(w.rows, kPlainWarps, sm_count, 8);
      if (x_aligned && addr % 16 == 0 && w.row_stride % 16 == 0 && w.cols % kPerChunk == 0)
        gemv_plain_kernel<T>
            <<<grid, kPlainWarps * 32, 0, stream>>>(data, w.row_stride, w.rows, w.cols, x, y);
      else
        gemv_plain_scalar_kernel<T>
            <<<grid, kPlainWarps * 32, 0, stream>>>(data, w.row_stride, w.rows, w.cols, x, y);
    } else {
      if (addr % 2 != 0 || w.row_stride % 2 != 0)
        fail(ErrorKind::Unsupported,
             std::string("matmul: ") + dtype_name(T) +
                 " weight rows must start at even addresses (16-bit scale fields)");
      const unsigned grid = grid_blocks(w.rows, kQuantWarps, sm_count, 16);
      if (x_aligned)
        gemv_quant_kernel<T, true>
            <<<grid, kQuantWarps * 32, 0, stream>>>(data, w.row_stride, w.rows, w.cols, x, y);
      else
        gemv_quant_kernel<T, false>
            <<<grid, kQuantWarps * 32, 0, stream>>>(data, w.row_stride, w.rows, w.cols, x, y);
    }
  });
  if (!known)
    fail(ErrorKind::Unsupported,
         std::string("matmul: weight type ") + dtype_name(w.dtype) + " has no CUDA kernel");
  check_launch("gemv");
}

}  // namespace ts::cuda
