// A MoE layer's FFN entry for decode rows in one kernel (Backend::add_rms_norm_route): x += res,
// h = rms_norm(x), the router's logits over h, and their top-k. As three kernels (add_rms_norm,
// the router's GEMV, route) it was two more dependent launches a layer on the token's critical
// path (PERFORMANCE.md, nineteenth session).
//
// Every block norms the row itself (norm_row.cuh: add_rms_norm's arithmetic, so h has its bits;
// 24 KB from L2 for a row of 2048, less than a launch costs), keeps h in shared memory and computes
// kRouterRows of the router's rows, a quarter of the block each. The last block of the row to
// finish (a counter, put back to zero) writes x and h, which no block reads any more by then, and
// routes the row's logits (route_device.cuh: route's rule and bits). The logits are summed in
// another order than the GEMV's: the same values up to rounding. Router rows of a plain type (f32,
// f16, bf16): llama.cpp's quantiser leaves routers f32.
#include <cstdint>

#include "backend/cuda/kernels.h"
#include "backend/cuda/norm_row.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quant_device.cuh"
#include "backend/cuda/route_device.cuh"

namespace ts::cuda {
namespace {

constexpr int kRouterRows = 4;           // router rows per block
constexpr int64_t kMaxEntryCols = 4096;  // a float4 of the row per thread, 1024 threads at most
constexpr int64_t kEntryColAlign = 512;  // 128 float4s: whole warps per router row
constexpr int kMaxEntryExperts = 256;    // route_row<8>

// Router row r's dot with h (shared memory, n / 4 float4s) by the `group` threads of the block
// that take it, this one being thread t of them: 16-byte chunks of the row, then the group's sum.
template <DType T>
__device__ __forceinline__ float router_dot(const uint8_t* row, const float4* h, int64_t n, int t,
                                            int group) {
  constexpr int kPer = T == DType::F32 ? 4 : 8;  // elements of a 16-byte chunk
  const int64_t chunks = n / kPer;
  float s = 0.0f;
#pragma unroll 4
  for (int64_t c = t; c < chunks; c += group) {
    float w[kPer];
    unpack_chunk<T>(__ldg(reinterpret_cast<const uint4*>(row) + c), w);
#pragma unroll
    for (int q = 0; q < kPer / 4; ++q) {
      const float4 x = h[c * (kPer / 4) + q];
      s += w[4 * q] * x.x + w[4 * q + 1] * x.y + w[4 * q + 2] * x.z + w[4 * q + 3] * x.w;
    }
  }
  return s;
}

template <DType T, int kPerLane>
__global__ void __launch_bounds__(1024)
    add_rms_norm_route_kernel(float* x, const float* res, const float* w, int64_t n, float eps,
                              bool plus_one, float* out, ActsView acts, const uint8_t* router,
                              size_t router_stride, int E, int k, RouterScoring scoring,
                              bool norm_topk, const float* bias, float* logits, int32_t* ids,
                              float* weights, int* done) {
  __shared__ float4 h[kMaxEntryCols / 4];
  __shared__ float part[32];
  __shared__ bool last;
  pdl_enter();
  const int64_t m = blockIdx.y, n4 = n / 4;
  const int64_t j = vec_index(0);
  auto* xr = reinterpret_cast<float4*>(x + m * n);
  const auto* w4 = reinterpret_cast<const float4*>(w);
  // One float4 a thread, the block exactly the row.
  float4 v[1] = {add4(xr[j], reinterpret_cast<const float4*>(res + m * n)[j])};
  const float inv = row_inv_rms(v, n, eps);
  h[j] = norm4(v[0], inv, w4[j], plus_one);
  __syncthreads();

  const int group = static_cast<int>(blockDim.x) / kRouterRows;
  const int g = static_cast<int>(threadIdx.x) / group, t = static_cast<int>(threadIdx.x) % group;
  const int r = static_cast<int>(blockIdx.x) * kRouterRows + g;
  const float s =
      r < E
          ? warp_sum(router_dot<T>(router + static_cast<size_t>(r) * router_stride, h, n, t, group))
          : 0.0f;
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (t == 0 && r < E) {
    float sum = 0.0f;
    for (int q = 0; q < group / 32; ++q) sum += part[g * (group / 32) + q];
    logits[m * E + r] = sum;
  }

  __threadfence();  // this block's logits are visible to whichever block routes them
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(done + m, 1) == static_cast<int>(gridDim.x) - 1;
    if (last) done[m] = 0;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  xr[j] = v[0];
  store_norm(v, inv, w4, plus_one, m, n4, reinterpret_cast<float4*>(out + m * n), acts);
  if (threadIdx.x < 32)
    route_row<kPerLane>(logits + m * E, E, k, scoring, norm_topk, bias, ids + m * k,
                        weights + m * k);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool add_rms_norm_route_fused(const float* x, const float* res, const float* w, int64_t rows,
                              int64_t n, const float* out, const Weight& router,
                              const RouterArgs& a) {
  const bool plain_router =
      router.dtype == DType::F32 || router.dtype == DType::F16 || router.dtype == DType::BF16;
  return rows >= 1 && rows <= kMaxEntryRows && n % kEntryColAlign == 0 && n <= kMaxEntryCols &&
         aligned16(x) && aligned16(res) && aligned16(w) && aligned16(out) && plain_router &&
         router.layout == WeightLayout::Rows && router.cols == n && router.rows == a.n_expert &&
         router.row_stride % 16 == 0 && aligned16(router.data) && a.n_expert <= kMaxEntryExperts &&
         a.k >= 1 && a.k <= a.n_expert && a.k <= kMaxTopK;
}

size_t moe_entry_scratch_bytes() {
  return kMaxEntryRows * sizeof(int);
}

bool launch_add_rms_norm_route(float* x, const float* res, const float* w, int64_t rows, int64_t n,
                               float eps, bool plus_one, float* out, const Weight& router,
                               float* logits, const RouterArgs& a, int32_t* ids, float* weights,
                               void* done, cudaStream_t stream, void* acts) {
  const dim3 grid(static_cast<unsigned>((a.n_expert + kRouterRows - 1) / kRouterRows),
                  static_cast<unsigned>(rows));
  const auto threads = static_cast<unsigned>(n / 4);
  const ActsView av = acts != nullptr ? acts_view(acts, rows * n) : ActsView{};
  const auto run = [&]<DType T, int kPerLane>() {
    launch("add rms norm route", add_rms_norm_route_kernel<T, kPerLane>, grid, threads, 0, stream,
           x, res, w, n, eps, plus_one, out, av, static_cast<const uint8_t*>(router.data),
           router.row_stride, static_cast<int>(a.n_expert), static_cast<int>(a.k), a.scoring,
           a.norm_topk, a.bias, logits, ids, weights, static_cast<int*>(done));
  };
  const auto by_experts = [&]<DType T>() {
    if (a.n_expert <= 128)
      run.template operator()<T, 4>();
    else
      run.template operator()<T, 8>();
  };
  if (router.dtype == DType::F32)
    by_experts.template operator()<DType::F32>();
  else if (router.dtype == DType::F16)
    by_experts.template operator()<DType::F16>();
  else
    by_experts.template operator()<DType::BF16>();
  return av.q != nullptr;
}

}  // namespace ts::cuda
