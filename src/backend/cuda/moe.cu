// Routed experts on the device: top-k routing by the family's rule, and the weighted sum of the
// k experts' outputs. With them (and the indexed GEMVs) a decode step over resident experts never
// reads the routing back to the host, so it can be recorded as a graph.
#include <algorithm>
#include <string>

#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/route_device.cuh"
#include "backend/cuda/routed_sum.cuh"
#include "backend/expert_paging.h"
#include "core/error.h"

namespace ts::cuda {
namespace {

// One warp per row of logits (route_device.cuh).
template <int kPerLane>
__global__ void __launch_bounds__(32)
    route_kernel(const float* logits, int E, int k, RouterScoring scoring, bool norm_topk,
                 const float* bias, int32_t* ids, float* weights) {
  pdl_enter();
  const int64_t m = blockIdx.x;
  route_row<kPerLane>(logits + m * E, E, k, scoring, norm_topk, bias, ids + m * k, weights + m * k);
}

// Each thread sums its columns over the k experts (routed_sum.cuh). Token blockIdx.y.
__global__ void combine_experts_kernel(RoutedRows r, int64_t n, float* out) {
  pdl_enter();
  const int64_t m = blockIdx.y;
  __shared__ int order[kMaxTopK];
  __shared__ float wt[kMaxTopK];
  routed_order(r, m, order, wt);
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < n;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc[1];
    routed_sum<1>(r, m, n, order, wt, c, acc);
    out[m * n + c] = acc[0];
  }
}

// One thread: the rule is sequential (each miss takes the slot the previous ones left), and a
// layer has a few dozen slots at most to scan.
__global__ void page_experts_kernel(ExpertPages p, const int32_t* ids, int k) {
  pdl_enter();
  page_step(p, ids, k);  // k <= n_slots: the store refuses fewer slots than routed experts
}

__global__ void commit_experts_kernel(ExpertPages p, const int32_t* ids, int k) {
  pdl_enter();
  commit_step(p, ids, k);
}

// Expert blockIdx.y's weight (`bytes`, 16-byte multiples at 16-byte aligned addresses) into its
// fill entry, the grid's threads over 16-byte chunks.
__global__ void fill_experts_kernel(const void* const* experts, void* const* fill,
                                    const int32_t* ids, size_t chunks) {
  pdl_enter();
  const int32_t id = ids[blockIdx.y];
  auto* dst = static_cast<uint4*>(fill[id]);
  if (dst == nullptr) return;
  const auto* src = static_cast<const uint4*>(experts[id]);
  for (size_t c = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[c] = src[c];
}

}  // namespace

void launch_page_experts(const ExpertPages& p, const int32_t* ids, int64_t k, cudaStream_t stream) {
  launch("page experts", page_experts_kernel, 1, 1, 0, stream, p, ids, static_cast<int>(k));
}

void launch_commit_experts(const ExpertPages& p, const int32_t* ids, int64_t k,
                           cudaStream_t stream) {
  launch("commit experts", commit_experts_kernel, 1, 1, 0, stream, p, ids, static_cast<int>(k));
}

void launch_fill_experts(const Weight& shape, const void* const* experts, void* const* fill,
                         const int32_t* ids, int64_t n, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(shape.rows) * shape.row_stride;
  if (bytes % 16 != 0 || reinterpret_cast<uintptr_t>(shape.data) % 16 != 0)
    fail(ErrorKind::Unsupported, "expert paging: weights of " + std::to_string(bytes) +
                                     " bytes are not whole 16-byte chunks");
  const size_t chunks = bytes / 16;
  const dim3 grid(static_cast<unsigned>(std::min<size_t>((chunks + 255) / 256, 1024)),
                  static_cast<unsigned>(n));
  launch("fill experts", fill_experts_kernel, grid, 256, 0, stream, experts, fill, ids, chunks);
}

void launch_route(const float* logits, int64_t M, const RouterArgs& a, int32_t* ids, float* weights,
                  cudaStream_t stream) {
  const auto kernel = a.n_expert <= 128   ? route_kernel<4>
                      : a.n_expert <= 256 ? route_kernel<8>
                                          : route_kernel<32>;
  launch("route", kernel, static_cast<unsigned>(M), 32, 0, stream, logits,
         static_cast<int>(a.n_expert), static_cast<int>(a.k), a.scoring, a.norm_topk, a.bias, ids,
         weights);
}

void launch_combine_experts(const RoutedRows& r, int64_t M, int64_t n, float* out,
                            cudaStream_t stream) {
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((n + kThreads - 1) / kThreads), static_cast<unsigned>(M));
  launch("combine experts", combine_experts_kernel, grid, kThreads, 0, stream, r, n, out);
}

}  // namespace ts::cuda
