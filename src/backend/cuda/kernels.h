// Host-side launchers of the CUDA backend's kernels. Every pointer is device memory unless named
// `host`; every launch goes on `stream` and is checked for launch errors. Arguments are validated
// by the backend (cuda_backend.cpp) before they get here.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/backend.h"

namespace ts::cuda {

// Experts picked on the device (Backend::matmul_indexed): GEMV i < n, along grid dimension y, uses
// the weight whose data pointer is table[ids[i]] (of the launch's dtype and shape), the input
// x + (i / experts_per_x) * x_stride (expert_index.cuh) and the output y + i * rows. A null table:
// the launch's own weight, n = 1. With `fill` (Backend::matmul_indexed_filling), GEMV i also
// stores every 16-byte chunk of weight it loads at the same offset from fill[ids[i]] when that is
// not null (plain types only).
struct ExpertIndex {
  const void* const* table = nullptr;
  const int32_t* ids = nullptr;
  int64_t n = 1;
  int64_t x_stride = 0;
  void* const* fill = nullptr;
  unsigned experts_per_x = 1;  // consecutive GEMVs sharing an input row (a token's k experts)
};

// Whether launch_gemv and the embedding take weights of type t (gemv.cu).
bool has_weight_kernels(DType t);
// The byte alignment the weight kernels need of a row of type t: f32's, the 16-bit scales and
// fields of the block formats, or none for MXFP4's 17-byte blocks (read a byte at a time).
constexpr int weight_alignment(DType t) {
  return t == DType::F32 ? 4 : t == DType::MXFP4 ? 1 : 2;
}

// Elementwise and row ops (elementwise.cu).
void launch_embed(const Weight& table, const int32_t* ids, int64_t M, float scale, float* out,
                  cudaStream_t stream);
// The norms and the GLU, given `acts` (the int8 GEMV's scratch for rows * n activations), also
// write their output there as launch_gemv_int8 would quantise it, where their kernel can (n a
// multiple of 32, 16-byte aligned rows, norms of up to 16384 elements): true when they did.
bool launch_rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps,
                     bool plus_one, float* out, cudaStream_t stream, void* acts = nullptr);
void launch_add_bias(float* y, const float* b, int64_t M, int64_t n, cudaStream_t stream);
void launch_add(float* y, const float* x, int64_t n, cudaStream_t stream);
// Backend::rope; with M-RoPE `streams` is the device copy of r.pair_stream and pos is [M][3]
// (nullptr streams: one position a row).
void launch_rope(float* x, int64_t M, int64_t n_heads, const int32_t* pos, const uint8_t* streams,
                 const RopeArgs& r, cudaStream_t stream);
// x += res, then out = rms_norm(x) (Backend::add_rms_norm).
bool launch_add_rms_norm(float* x, const float* res, const float* w, int64_t rows, int64_t n,
                         float eps, bool plus_one, float* out, cudaStream_t stream,
                         void* acts = nullptr);
// Per-head norms of one row's n_q query and n_k key heads, then rope over both (rms_norm_heads
// twice and rope, the same bits), in one kernel where qk_norm_rope_fused(head_dim): not for heads
// long enough for the vectorised norm, whose bits the fused kernel would not reproduce.
bool qk_norm_rope_fused(int64_t head_dim);
void launch_qk_norm_rope(float* qk, const float* q_w, const float* k_w, int64_t n_q, int64_t n_k,
                         float eps, bool plus_one, const int32_t* pos, const RopeArgs& r,
                         cudaStream_t stream);
// Backend::rope_kv_store in one kernel, where rope_kv_store_fused(r, norm): heads of 64 or 128
// elements, fully rotated, per-head norms (q_w, k_w) only with neox pairs. kv.width is n_k heads.
bool rope_kv_store_fused(const RopeArgs& r, bool norm);
void launch_rope_kv_store(float* qkv, const float* q_w, const float* k_w, int64_t n_q, int64_t n_k,
                          float eps, bool plus_one, const int32_t* pos, const RopeArgs& r,
                          const KvView& kv, cudaStream_t stream);
bool launch_glu(Glu act, const float* gate, const float* up, int64_t rows, int64_t n,
                int64_t stride, float* out, cudaStream_t stream, void* acts = nullptr);
// Backend::glu_clamped (gpt-oss's SwiGLU), in the CPU's order of operations.
void launch_glu_clamped(const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
                        const ClampedSwiGlu& p, float* out, cudaStream_t stream);
// y[m] += sigmoid(g[m]) * x[m] for M rows of n (Backend::add_gated_rows).
void launch_add_gated_rows(float* y, const float* x, const float* g, int64_t M, int64_t n,
                           cudaStream_t stream);
void launch_scatter_add_rows(float* y, const float* x, const int32_t* idx, const float* scale,
                             int64_t M, int64_t n, cudaStream_t stream);
// The same sums as launch_scatter_add_rows, parallel over destination rows: destination dst[j]
// (j < D) takes rows src[off[j]], ..., src[off[j + 1] - 1] of x, in that order.
void launch_scatter_add_sorted(float* y, const float* x, const int32_t* dst, const int32_t* off,
                               const int32_t* src, const float* scale, int64_t D, int64_t n,
                               cudaStream_t stream);
void launch_gather_rows(const float* x, const int32_t* idx, int64_t M, int64_t n, float* out,
                        cudaStream_t stream);
void launch_softcap(float* x, int64_t n, float cap, cudaStream_t stream);
// out[i] = nll_of_row(row i of logits, V, targets[i]) for n rows (nll_rows.cu); all device memory.
void launch_nll_rows(const float* logits, int64_t n, int64_t V, const int32_t* targets, double* out,
                     cudaStream_t stream);

// Activations converted for a tensor-core GEMM: f32 -> f16 or bf16 (round to nearest even).
void launch_convert_f32(const float* x, int64_t n, DType to, void* out, cudaStream_t stream);

// Rows [r0, r1) of a weight dequantised to f16, packed as [r1 - r0][w.cols] (gemm.cpp's
// dequantise-then-GEMM path for quantised weights).
void launch_dequant_rows_f16(const Weight& w, int64_t r0, int64_t r1, void* out,
                             cudaStream_t stream);

// Every row of n experts laid out like `shape` (experts: a device table of their weights) as f16,
// expert i's rows * cols elements at out + i * rows * cols.
void launch_dequant_experts_f16(const Weight& shape, const void* const* experts, int64_t n,
                                void* out, cudaStream_t stream);

// y = W x for one activation row (M = 1), in f32 whatever the layout: 16-byte vector loads when
// rows and x are aligned, element loads otherwise.
void launch_gemv(const Weight& w, const float* x, float* y, cudaStream_t stream,
                 const ExpertIndex& ix = {});

// q8_0 weights in WeightLayout::Q8Groups (q8_groups.cu): q8_groups_fit() says whether `w` (rows
// layout) can be rearranged with a group staged in `max_smem` bytes of shared memory;
// launch_pack_q8_groups() rearranges it in place and sets its layout.
bool q8_groups_fit(const Weight& w, size_t max_smem);
void launch_pack_q8_groups(Weight& w, cudaStream_t stream);

// q6_k weights in WeightLayout::Q6Rows (q6_rows.cu): q6_rows_fit() says whether `w` (rows layout)
// can be rearranged with a group of rows staged in `max_smem` bytes of shared memory;
// launch_pack_q6_rows() rearranges it in place and sets its layout.
bool q6_rows_fit(const Weight& w, size_t max_smem);
void launch_pack_q6_rows(Weight& w, cudaStream_t stream);

// Decode GEMV through int8 activations (gemv_int8.cu): q8_0, q4_k and q6_k on sm_90 and later,
// and on every architecture q8_0 in WeightLayout::Q8Groups, q6_k in WeightLayout::Q6Rows and q4_k
// rows on 16-byte boundaries.
// The M rows of x (1 to kGemvRows, 1 under an ExpertIndex) are quantised per 32 elements into
// `scratch` (gemv_int8_scratch_bytes(M * w.cols) bytes of device memory, 256-byte aligned), so each
// output is off the f32 GEMV by at most sum |w_k| * (max |x| over k's block / 127) / 2; each row
// gets the bits of its own one-row launch.
// Under an ExpertIndex with x_stride != 0 (which must equal w.cols), its n / experts_per_x input
// rows are quantised: the scratch then takes gemv_int8_scratch_bytes(n / experts_per_x * w.cols).
// `quantised`: the scratch already holds x's rows so (written by launch_rms_norm, launch_glu or
// launch_attention_decode with that scratch, and nothing has written x since).
bool gemv_int8_supported(const Weight& w, int sm_major);
// Rows of a matmul over such weights that take the GEMV (the server's batched decode of a few
// requests), not a GEMM over the weights dequantised to f16: gemv_int8_max_rows(w), which is
// kGemvRows for the weights in 16-byte units (the packed q8_0 and q6_k, q4_k, q5_k: a launch reads
// each weight once for up to 4 rows) and 4 for the others (a launch per row). Up to 8 rows the
// GEMVs cost less than the GEMM, which dequantises the weights first (measured on the H200:
// docs/PERFORMANCE.md, "Measured choices").
constexpr int64_t kGemvRows = 8;
int64_t gemv_int8_max_rows(const Weight& w);
// The input rows a launch quantises (M, or an index's rows): its scratch is
// gemv_int8_scratch_bytes(gemv_int8_input_rows(M, ix) * w.cols).
int64_t gemv_int8_input_rows(int64_t M, const ExpertIndex& ix);
size_t gemv_int8_scratch_bytes(int64_t cols);
void launch_gemv_int8(const Weight& w, const float* x, int64_t M, float* y, void* scratch,
                      bool quantised, cudaStream_t stream, const ExpertIndex& ix = {});

// Routing and expert sums (moe.cu). route: one warp per row of logits [M][a.n_expert], writing
// ids / weights [M][a.k] as route_token() does (a.bias in device memory); at most
// kMaxDeviceRoutedExperts experts, top-k <= kMaxTopK.
constexpr int kMaxDeviceRoutedExperts = 1024;
constexpr int kMaxTopK = 64;
void launch_route(const float* logits, int64_t M, const RouterArgs& a, int32_t* ids, float* weights,
                  cudaStream_t stream);
// A routed FFN's output of M tokens before its sum: token m's k experts' rows y[m * k + i] (of the
// FFN width), their ids and weights [M][k] (route's outputs).
struct RoutedRows {
  const float* y = nullptr;
  const int32_t* ids = nullptr;
  const float* weights = nullptr;
  int k = 0;
};
// Per token m < M: out[m] = sum over i < k of weights[m][i] * y[m][i] (rows of n), in ascending
// id order.
void launch_combine_experts(const RoutedRows& r, int64_t M, int64_t n, float* out,
                            cudaStream_t stream);
// x += that sum, then out = rms_norm(x) (Backend::combine_add_rms_norm), in one kernel where
// combine_add_rms_norm_fused(); `acts` as for launch_rms_norm.
bool combine_add_rms_norm_fused(const RoutedRows& r, const float* x, const float* w, int64_t n,
                                const float* out);
bool launch_combine_add_rms_norm(const RoutedRows& r, float* x, const float* w, int64_t rows,
                                 int64_t n, float eps, bool plus_one, float* out,
                                 cudaStream_t stream, void* acts = nullptr);

// Device-side expert paging (moe.cu): Backend::page_experts / commit_experts as one thread each
// (expert_paging.h's rule), and the fill of matmul_indexed_filling for weights the GEMV does not
// fill itself: each expert with a fill entry has its rows * stride bytes copied there.
void launch_page_experts(const ExpertPages& p, const int32_t* ids, int64_t k, cudaStream_t stream);
void launch_commit_experts(const ExpertPages& p, const int32_t* ids, int64_t k,
                           cudaStream_t stream);
void launch_fill_experts(const Weight& shape, const void* const* experts, void* const* fill,
                         const int32_t* ids, int64_t n, cudaStream_t stream);
// True when launch_gemv loads w in whole 16-byte chunks (plain types, 16-byte aligned rows and
// x): then it fills under an index itself.
bool gemv_loads_chunks(const Weight& w, const float* x, int64_t x_stride);

// KV cache (kv_cache.cu): rows pos[m] of the cache take k/v rows m, converted to kv.dtype. With
// `each` (device memory, M views of kv's type, width and row bytes), row m goes to the cache of
// each[m] instead: a decode step's token of each sequence.
void launch_kv_store(const KvView& kv, const KvView* each, const float* k, const float* v,
                     int64_t M, const int32_t* pos, cudaStream_t stream);

// Attention: heads of up to kMaxAttentionHeadDim elements, a multiple of 8; pos, a.sinks and
// a.key_end in device memory. Decode (attention_decode.cu): split-KV, `splits` key ranges per block
// of query heads (one head for rows of fewer than narrow_keys keys, else decode_heads_per_block()
// of the heads that share a kv head; the same bits either way), the last block of each merging
// them. One query row over kv, or with `each` (device memory, as for launch_kv_store) M rows, row m
// over each[m] at pos[m], each as the one row alone. `scratch` (attention_decode_scratch_bytes() of
// n_head * M heads, zeroed when allocated, left as found) holds the counters and partials; at most
// kMaxDecodeHeads heads in all and kMaxDecodeSplits ranges; head_dim a multiple of 8.
constexpr int64_t kMaxAttentionHeadDim = 576;  // MLA's latent rows (kv_lora_rank 512 + rope 64)
constexpr int kMaxDecodeSplits = 64;           // key ranges per head at most
constexpr int kMaxDecodeHeads = 4096;          // heads of one launch's rows at most
// Rows of fewer keys take a block per query head: faster at short contexts, slower at long ones,
// where the group's block reads each K and V byte once (docs/PERFORMANCE.md, "Measured choices").
constexpr int64_t kDecodeNarrowKeys = 512;
int decode_heads_per_block(int64_t n_head, int64_t n_head_kv, int64_t head_dim);
size_t attention_decode_scratch_bytes(int64_t n_head, int splits, int64_t head_dim);
// With `acts` (as for launch_rms_norm, M * n_head * head_dim activations), the output is also
// written quantised for the int8 GEMV where head_dim is a multiple of 32: true when it was.
bool launch_attention_decode(const float* q, const KvView& kv, const KvView* each, int64_t M,
                             const int32_t* pos, const AttentionArgs& a, int splits,
                             int64_t narrow_keys, void* scratch, float* out, cudaStream_t stream,
                             void* acts = nullptr);
// The decode kernel over M query rows of one cache, each row's keys in one range (no scratch):
// prefill for heads too wide for the tiled kernels.
void launch_attention_rows(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                           const AttentionArgs& a, float* out, cudaStream_t stream);
// Prefill (M > 1, attention.cu): a tiled kernel over blocks of query rows.
void launch_attention_prefill(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                              const AttentionArgs& a, float* out, cudaStream_t stream);

// Gated DeltaNet over the M rows of one sequence (delta_net.cu), as Backend::conv_silu and
// Backend::delta_rule say. conv_silu: a thread per channel, kernel of 1 to kMaxConvKernel taps.
// delta_rule: the recurrent form, a block per value head and 32 value columns, the state in
// registers; k_head_dim up to kMaxDeltaHeadDim, n_v_heads a multiple of n_k_heads.
constexpr int64_t kMaxConvKernel = 8;
constexpr int64_t kMaxDeltaHeadDim = 256;
void launch_conv_silu(float* x, int64_t M, int64_t channels, const float* taps, int64_t kernel,
                      float* window, cudaStream_t stream);
void launch_delta_rule(const float* qkv, const float* beta, const float* alpha, int64_t M,
                       const DeltaRuleArgs& a, float* state, float* out, cudaStream_t stream);

// Launch error of the kernel just queued, as ts::fail with `what` and the CUDA error string.
void check_launch(const char* what);

}  // namespace ts::cuda
