#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/arg_stage.h"
#include "backend/cuda/ceilings.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/row_ops.h"
#include "backend/cuda/step_graph.h"
#include "core/checked.h"
#include "core/error.h"

namespace ts {
namespace {

// Every allocation carries this many zeroed bytes past its end: the GEMV kernels round a row's
// last 16-byte load up, and may read up to 15 bytes beyond the last row of a matrix.
constexpr size_t kTailSlack = 16;
// Grid dimension y of the row kernels (embed rows, dequantised rows per chunk).
constexpr int64_t kMaxGridY = 65535;
// matmul_heads' gathered inputs and outputs at most, but for a single row's: it takes a
// micro-batch's rows in launches of as many as fit.
constexpr int64_t kHeadsScratchBytes = int64_t{16} << 20;
// Events of the async copies, reused round robin: a ticket stays exact for this many later copies,
// and an older one waits for a later copy of the same in-order stream, never for less.
constexpr uint64_t kCopyEvents = 256;
// Argument uploads (ArgStage::put) of a one-token step at most, per layer (rope of q and of k, each
// its positions and, with M-RoPE, its pair streams: four; the KV store; attention) and for the
// embedding and the head together.
constexpr int64_t kStepPutsPerLayer = 6;
// The same for a decode step of several sequences: the KV store and the attention upload the
// sequences' cache views as well as the positions.
constexpr int64_t kBatchedStepPutsPerLayer = 8;
// Recorded steps kept at once: one per decoding sequence over resident weights, one per MoE layer
// and sequence when the experts stream (a step is then recorded in pieces between the reads of
// the routing, see Forward::run); the least recently replayed goes first.
constexpr size_t kMaxGraphs = 512;
// Of those, the batched decode steps (several sequences' tokens in one): a server's set of
// running requests changes as they come and go, and only the current set's step replays again.
constexpr size_t kMaxBatchedGraphs = 4;

// The weight types whose decode GEMV loads rows in 16-byte chunks and can store them on the way.
bool plain_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

std::string str(int64_t v) {
  return std::to_string(v);
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    cuda::check(cudaSetDevice(device), "cudaSetDevice");
    cudaDeviceProp prop{};
    cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    sm_count_ = prop.multiProcessorCount;
    sm_major_ = prop.major;
    max_smem_ = prop.sharedMemPerBlockOptin;
    name_ = "cuda (" + std::string(prop.name) + ", sm_" + str(prop.major) + str(prop.minor) +
            ", device " + str(device) + ")";
    cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda::check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
                "cudaStreamCreate (copies)");
    cuda::check(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming),
                "cudaEventCreate");
    copy_events_.resize(kCopyEvents);
    for (cudaEvent_t& e : copy_events_)
      cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    args_ = std::make_unique<cuda::ArgStage>(stream_);
    gemm_ = std::make_unique<cuda::Gemm>(stream_);
    partials_ = std::make_unique<cuda::DeviceBuffer>(stream_);
    int8_acts_ = std::make_unique<cuda::DeviceBuffer>(stream_);
    grouped_acts_ = std::make_unique<cuda::DeviceBuffer>(stream_);
    nll_ = std::make_unique<cuda::DeviceBuffer>(stream_);
    heads_ = std::make_unique<cuda::DeviceBuffer>(stream_);
    // TURBOSPARK_CUDA_GRAPHS=0 runs every step eagerly (to measure what the graphs save).
    const char* graphs = std::getenv("TURBOSPARK_CUDA_GRAPHS");
    graphs_enabled_ = graphs == nullptr || std::strcmp(graphs, "0") != 0;
  }

  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    recordings_.clear();
    warmups_.clear();
    grouped_acts_.reset();
    nll_.reset();
    heads_.reset();
    head_tables_.clear();
    head_ids_.clear();
    int8_acts_.reset();
    partials_.reset();
    gemm_.reset();
    args_.reset();
    cudaStreamSynchronize(copy_stream_);
    for (cudaEvent_t e : copy_events_) cudaEventDestroy(e);
    cudaEventDestroy(compute_mark_);
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return name_; }
  void* native_stream() override { return stream_; }

  void* alloc(size_t bytes) override {
    const size_t total = checked_add(bytes, kTailSlack, "CUDA allocation");
    void* p = nullptr;
    const cudaError_t e = cuda::device_malloc(&p, total);
    if (e != cudaSuccess)
      fail(ErrorKind::Runtime, "CUDA out of memory allocating " + std::to_string(bytes) +
                                   " bytes on device " + str(device_) + ": " +
                                   cudaGetErrorString(e));
    cuda::check(cudaMemsetAsync(p, 0, total, stream_), "cudaMemset");
    return p;
  }

  void free(void* p) override {
    if (p == nullptr) return;
    cuda::check(cudaStreamSynchronize(stream_), "free");
    cuda::check(cudaStreamSynchronize(copy_stream_), "free");
    recordings_.clear();
    warmups_.clear();
    int8_inputs_.clear();  // the address may come back as another buffer
    quantised_ = {};
    cuda::check(cuda::device_free(p), "cudaFree");
  }

  uint64_t device_peak_bytes() const override { return cuda::device_peak_bytes(); }

  // Each scratch buffer grows to the largest request it sees (DeviceBuffer): the sum of their
  // largest requests over the plan's matmuls and attention.
  uint64_t scratch_bytes(const ScratchPlan& p) const override {
    check_head_dim(p.head_dim);
    const int64_t B = p.max_rows, k = std::max<int64_t>(p.experts_per_token, 1);
    const int64_t routed = B * k;  // rows of an MoE micro-batch's experts
    // Rows and experts of one matmul_grouped: every routed one, or one expert's (streaming).
    const int64_t group_rows = p.experts_one_at_a_time ? B : routed;
    const int64_t group_experts = p.experts_one_at_a_time ? 1 : std::min(p.n_expert, routed / 2);
    uint64_t gemm_acts = 0, dequant = 0, grouped_acts = 0;
    int64_t int8_cols = 0;
    const auto dense_gemm = [&](const MatmulShape& w) {
      gemm_acts = std::max(gemm_acts, cuda::Gemm::acts_bytes(w, B));
      if (B > 1) dequant = std::max(dequant, cuda::Gemm::dequant_bytes(w));
    };
    for (const MatmulShape& w : p.dense) {
      dense_gemm(w);
      int8_cols = std::max(int8_cols, w.cols * std::min<int64_t>(B, cuda::kGemvRows));
    }
    for (const MatmulShape& w : p.experts) {
      // matmul_indexed quantises a row per expert of each token it runs: one token's where the
      // experts stream, a decode step's where they are resident
      const int64_t tokens = p.experts_one_at_a_time ? 1 : p.decode_step_rows;
      int8_cols = std::max(int8_cols, w.cols * k * tokens);
      const int64_t elems = w.rows * w.cols;
      if (B < 2) continue;  // one-row groups take the GEMV
      // The paths of matmul_grouped: a matmul per group (f32, or too large for the scratch or a
      // grid), else the grouped kernels over 16-bit activations, after a dequantisation of as
      // many experts at once as the scratch holds for the block types they don't read.
      if (w.dtype == DType::F32 || elems > cuda::Gemm::kDequantElems || w.rows > kMaxGridY) {
        dense_gemm(w);
        continue;
      }
      grouped_acts = std::max(grouped_acts, static_cast<uint64_t>(group_rows * w.cols) * 2);
      if (!cuda::grouped_kernels_read(w.dtype)) {
        const int64_t batch = std::min(cuda::Gemm::kDequantElems / elems, group_experts);
        dequant = std::max(dequant, static_cast<uint64_t>(batch * elems) * 2);
      }
    }
    // The largest argument upload: a micro-batch's positions, its routed rows' scatter indices,
    // the grouped kernels' row tiles (a partial tile per expert at most), an expert table.
    const int64_t tiles = routed / cuda::kGroupedTileRows + p.n_expert;
    const size_t largest_put = std::max({static_cast<size_t>(routed) * sizeof(int32_t),
                                         static_cast<size_t>(tiles) * sizeof(cuda::GroupTile),
                                         static_cast<size_t>(p.n_expert) * sizeof(void*)});
    // One sequence's recorded steps: one wanting logits and one not, each the tables of its
    // pieces (up to one per layer when experts stream), which together hold the step's uploads.
    const size_t step_puts = static_cast<size_t>(kStepPutsPerLayer * (p.n_layer + 1));
    size_t recorded = 2 * (step_puts * cuda::ArgStage::kSlotAlign +
                           static_cast<size_t>(p.n_layer + 1) * cuda::StepGraph::table_bytes(0));
    // The batched decode steps kept, each one piece (streamed experts' run eagerly).
    if (p.decode_step_rows > 1 && !p.experts_one_at_a_time) {
      const auto puts = static_cast<size_t>(kBatchedStepPutsPerLayer * (p.n_layer + 1));
      recorded +=
          kMaxBatchedGraphs * cuda::StepGraph::table_bytes(puts * cuda::ArgStage::kSlotAlign);
    }
    const AttentionArgs one_token{p.n_head, p.n_head_kv, p.head_dim};
    const auto nll = static_cast<uint64_t>(B) * sizeof(double);  // nll_rows of a micro-batch
    return cuda::Gemm::kWorkspaceBytes + gemm_acts + dequant + grouped_acts + nll +
           cuda::gemv_int8_scratch_bytes(int8_cols) +
           cuda::attention_decode_scratch_bytes(p.n_head * p.decode_step_rows,
                                                decode_splits(one_token), p.head_dim) +
           cuda::ArgStage::capacity_bound(largest_put) + recorded;
  }

  void* alloc_host_pinned(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocPortable);
    if (e != cudaSuccess)
      fail(ErrorKind::Runtime, "CUDA out of pinned host memory allocating " +
                                   std::to_string(bytes) + " bytes: " + cudaGetErrorString(e));
    return p;
  }

  void free_host_pinned(void* p) override {
    if (p != nullptr) cuda::check(cudaFreeHost(p), "cudaFreeHost");
  }

  void copy_after_compute() override {
    cuda::check(cudaEventRecord(compute_mark_, stream_), "copy after compute");
    cuda::check(cudaStreamWaitEvent(copy_stream_, compute_mark_, 0), "copy after compute");
  }

  uint64_t copy_to_device_async(void* dst, const void* src, size_t bytes) override {
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, copy_stream_),
                "async copy to device");
    cuda::note_launch();
    const uint64_t ticket = ++copies_;
    cuda::check(cudaEventRecord(copy_events_[ticket % kCopyEvents], copy_stream_),
                "async copy to device");
    return ticket;
  }

  void compute_waits_for(uint64_t ticket) override {
    if (ticket == 0) return;
    cuda::check(cudaStreamWaitEvent(stream_, copy_events_[ticket % kCopyEvents], 0),
                "wait for a copy");
  }

  // Called from reader threads too: touches only the fixed event ring.
  void host_waits_for(uint64_t ticket) override {
    if (ticket == 0) return;
    cuda::check(cudaSetDevice(device_), "cudaSetDevice");
    cuda::check(cudaEventSynchronize(copy_events_[ticket % kCopyEvents]), "wait for a copy");
  }

  // Synchronous like the CPU backend's memcpy: the host memory may be reused on return.
  void to_device(void* dst, const void* src, size_t bytes) override {
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
                "copy to device");
    cuda::note_launch();
    cuda::check(cudaStreamSynchronize(stream_), "copy to device");
  }

  void to_host(void* dst, const void* src, size_t bytes) override {
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
    cuda::check(cudaStreamSynchronize(stream_), "copy to host");
  }

  void to_host_async(void* dst, const void* src, size_t bytes) override {
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
  }

  void copy(void* dst, const void* src, size_t bytes) override {
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
                "copy on the device");
    cuda::note_launch();
  }

  void synchronize() override {
    cuda::check(cudaStreamSynchronize(copy_stream_), "synchronize");
    cuda::check(cudaStreamSynchronize(stream_), "synchronize");
  }

  DeviceCeilings measure_ceilings() override {
    cuda::check(cudaStreamSynchronize(stream_), "ceilings");
    return cuda::measure_ceilings(stream_);
  }

  // The first run of a key is eager (it sizes every scratch buffer and counts the arguments);
  // the second is captured into a graph and replayed, as is every later one.
  void run_recorded(const StepKey& key, const std::function<void()>& ops) override {
    // A recorded step's work is a graph launch, not launch()'s: no quantised input crosses it.
    cuda::note_launch();
    if (!graphs_enabled_) return ops();
    Recording* rec = find_recording(key);
    if (rec != nullptr && rec->scratch != scratch_generation()) {
      recordings_.erase(recordings_.begin() + (rec - recordings_.data()));
      rec = nullptr;
    }
    if (rec == nullptr) {
      rec = record(key, ops);
      if (rec == nullptr) return;
    }
    if (rec->graph == nullptr) return ops();  // could not be recorded
    rec->last_use = ++replays_;
    rec->graph->replay();
    cuda::note_launch();
  }

  bool has_weight_kernels(DType t) const override { return cuda::has_weight_kernels(t); }

  Weight upload_weight(DType dtype, int64_t rows, int64_t cols, size_t row_stride,
                       const void* host) override {
    if (!cuda::has_weight_kernels(dtype))
      fail(ErrorKind::Unsupported,
           std::string("weight type ") + dtype_name(dtype) + " has no CUDA kernels");
    const uint64_t row = row_bytes(dtype, static_cast<uint64_t>(cols), "weight upload");
    if (row_stride < row)
      fail(ErrorKind::Model, "weight upload: row stride " + std::to_string(row_stride) +
                                 " is shorter than a row of " + std::to_string(row) + " bytes");
    const auto elem_align = static_cast<size_t>(cuda::weight_alignment(dtype));
    if (row_stride % elem_align != 0)
      fail(ErrorKind::Unsupported, "weight upload: row stride " + std::to_string(row_stride) +
                                       " is not a multiple of " + std::to_string(elem_align) +
                                       " bytes");
    const size_t bytes = checked_mul(static_cast<uint64_t>(rows), row_stride, "weight upload");
    void* data = alloc(bytes);
    to_device(data, host, bytes);
    return Weight{dtype, rows, cols, row_stride, data};
  }

  void release_weight(Weight& w) override {
    free(const_cast<void*>(w.data));
    w = Weight{};
  }

  // q8_0 into 4-row groups with the codes before the scales, q6_k into rows of the blocks' bodies
  // before their d values: the decode GEMV then loads quants as aligned 16-byte vectors (the
  // file's 34- and 210-byte blocks keep 2-byte alignment only, so its kernel stages rows in shared
  // memory and realigns every word). A group is staged in shared memory to be rearranged in
  // place; those too long for that keep the file's layout. q6_k groups take 1 to 8 rows, by the
  // row's length: views start at a multiple of 8.
  void pack_weight(Weight& w) override {
    if (cuda::q8_groups_fit(w, max_smem_))
      cuda::launch_pack_q8_groups(w, stream_);
    else if (cuda::q6_rows_fit(w, max_smem_))
      cuda::launch_pack_q6_rows(w, stream_);
  }
  int64_t weight_row_group(DType dtype) const override {
    return dtype == DType::Q8_0 ? kQ8GroupRows : dtype == DType::Q6_K ? kQ6MaxGroupRows : 1;
  }

  void embed(const Weight& table, const int32_t* ids, int64_t M, float scale, float* out) override {
    for (int64_t m = 0; m < M; ++m)
      if (ids[m] < 0 || ids[m] >= table.rows)
        fail(ErrorKind::Input,
             "token id " + str(ids[m]) + " is outside the vocabulary of " + str(table.rows));
    check_rows(M, "embed");
    const auto* d_ids = static_cast<const int32_t*>(args_->put(ids, sizeof(int32_t) * M));
    cuda::launch_embed(table, d_ids, M, scale, out, stream_);
  }

  void rms_norm(const float* x, const float* w, int64_t M, int64_t n, float eps, bool plus_one,
                float* out) override {
    produce(out, M, n, [&](void* acts) {
      return cuda::launch_rms_norm(x, w, M, n, eps, plus_one, out, stream_, acts);
    });
  }

  void add_rms_norm(float* x, const float* y, const float* w, int64_t M, int64_t n, float eps,
                    bool plus_one, float* out) override {
    produce(out, M, n, [&](void* acts) {
      return cuda::launch_add_rms_norm(x, y, w, M, n, eps, plus_one, out, stream_, acts);
    });
  }

  void rms_norm_heads(float* x, const float* w, int64_t M, int64_t n_heads, int64_t head_dim,
                      float eps, bool plus_one) override {
    cuda::launch_rms_norm(x, w, M * n_heads, head_dim, eps, plus_one, x, stream_);
  }

  // Quantised weights take the int8 GEMV for one row, and for a few rows (the server's batched
  // decode of a few requests; gemv_int8_max_rows): a GEMM would first write the weights out as
  // f16 and read them back, ~4 more bytes a weight (two sequences decoded together ran far slower
  // than one: docs/PERFORMANCE.md, "Measured choices").
  // Each row gets the bits of its own decode.
  void matmul(const Weight& w, const float* x, int64_t M, float* y) override {
    const bool int8 = cuda::gemv_int8_supported(w, sm_major_);
    if (int8 && M <= cuda::gemv_int8_max_rows(w)) {
      int8_gemv(w, x, M, y, {});
    } else if (M > 1) {
      gemm_->run(w, x, M, y);
    } else {
      cuda::launch_gemv(w, x, y, stream_);
    }
  }

  // f16 / bf16, q8_0 and q4_k weights: the groups' activation rows converted once (to f16 but for
  // bf16), then one tensor-core launch over every tile of every group (grouped_mma.cu,
  // grouped_mma_q8.cu; q8_0 in 4-row groups, resident, and in the file's layout, streamed, give the
  // same bits). Other block types: the experts dequantised to f16, then the f16 launch
  // (matmul_grouped_f16). A one-row group is a one-row matmul (the GEMV): the decode of streamed
  // experts then gives the bits of matmul_indexed, the decode of resident ones. f32 weights, and
  // experts too large for the dequantisation scratch or a grid: a matmul per group.
  void matmul_grouped(const Weight& shape, const void* const* weights, const int64_t* row0,
                      const int64_t* rows, int64_t G, const float* x, float* y) override {
    for (int64_t g = 0; g < G; ++g)
      if (rows[g] < 0 || row0[g] < 0)
        fail(ErrorKind::Runtime, "matmul_grouped: group " + str(g) + " has rows [" + str(row0[g]) +
                                     ", +" + str(rows[g]) + ")");
    const bool q8 = cuda::grouped_mma_q8_supported(shape, weights, G);
    if (q8 || cuda::grouped_mma_supported(shape, weights, G))
      return grouped_tiles(shape, weights, row0, rows, G, x, y, q8);
    if (plain_type(shape.dtype) || shape.rows * shape.cols > cuda::Gemm::kDequantElems ||
        shape.rows > kMaxGridY)
      return Backend::matmul_grouped(shape, weights, row0, rows, G, x, y);
    matmul_grouped_f16(shape, weights, row0, rows, G, x, y);
  }

  // Block types the grouped kernels don't read: the experts of groups of two or more rows
  // dequantised to f16, as many at a time as the GEMM's dequantisation scratch holds (one launch),
  // then the f16 grouped launch over their tiles. A matmul per group (the f16 GEMM over the same
  // dequantised rows) launched ~7 kernels per expert.
  void matmul_grouped_f16(const Weight& shape, const void* const* weights, const int64_t* row0,
                          const int64_t* rows, int64_t G, const float* x, float* y) {
    Weight f16 = shape;
    f16.dtype = DType::F16;
    f16.layout = WeightLayout::Rows;
    f16.row_stride = static_cast<size_t>(shape.cols) * 2;
    const int64_t elems = shape.rows * shape.cols;
    const auto per_batch = static_cast<size_t>(cuda::Gemm::kDequantElems / elems);
    std::vector<const void*> quantised, dequantised;
    std::vector<int64_t> batch_row0, batch_rows;
    const auto flush = [&] {
      if (quantised.empty()) return;
      const auto n = static_cast<int64_t>(quantised.size());
      const auto* table = static_cast<const void* const*>(
          args_->put(quantised.data(), quantised.size() * sizeof(void*)));
      auto* out = static_cast<uint8_t*>(gemm_->dequant_scratch(static_cast<size_t>(n * elems) * 2));
      cuda::launch_dequant_experts_f16(shape, table, n, out, stream_);
      dequantised.clear();
      for (int64_t i = 0; i < n; ++i) dequantised.push_back(out + i * elems * 2);
      grouped_tiles(f16, dequantised.data(), batch_row0.data(), batch_rows.data(), n, x, y, false);
      quantised.clear();
      batch_row0.clear();
      batch_rows.clear();
    };
    for (int64_t g = 0; g < G; ++g) {
      if (rows[g] == 0) continue;
      if (rows[g] == 1) {
        one_row_group(shape, weights[g], row0[g], x, y);
        continue;
      }
      quantised.push_back(weights[g]);
      batch_row0.push_back(row0[g]);
      batch_rows.push_back(rows[g]);
      if (quantised.size() == per_batch) flush();
    }
    flush();
  }

  // A group of one row (x's row `row`) through the GEMV of the weight at w.
  void one_row_group(const Weight& shape, const void* w, int64_t row, const float* x, float* y) {
    Weight one = shape;
    one.data = w;
    matmul(one, x + row * shape.cols, 1, y + row * shape.rows);
  }

  // matmul_grouped over weights the tensor-core kernels read (q8: grouped_mma_q8.cu).
  void grouped_tiles(const Weight& shape, const void* const* weights, const int64_t* row0,
                     const int64_t* rows, int64_t G, const float* x, float* y, bool q8) {
    tiles_.clear();
    int64_t lo = 0, hi = 0;
    for (int64_t g = 0; g < G; ++g) {
      if (rows[g] == 0) continue;
      if (rows[g] == 1) {
        one_row_group(shape, weights[g], row0[g], x, y);
        continue;
      }
      lo = tiles_.empty() ? row0[g] : std::min(lo, row0[g]);
      hi = std::max(hi, row0[g] + rows[g]);
      for (int64_t r = 0; r < rows[g]; r += cuda::kGroupedTileRows)
        tiles_.push_back({weights[g], row0[g] + r, std::min(cuda::kGroupedTileRows, rows[g] - r)});
    }
    if (tiles_.empty()) return;
    if (tiles_.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      fail(ErrorKind::Unsupported,
           "matmul_grouped: " + std::to_string(tiles_.size()) + " row tiles in one call");
    const int64_t n = (hi - lo) * shape.cols;
    void* xa = grouped_acts_->get(static_cast<size_t>(n) * 2, "grouped matmul activations");
    // bf16 weights multiply bf16 activations; the others (f16, and q8_0 / q4_k decoded in the
    // kernels) f16 ones.
    const DType act = shape.dtype == DType::BF16 ? DType::BF16 : DType::F16;
    cuda::launch_convert_f32(x + lo * shape.cols, n, act, xa, stream_);
    const auto* d_tiles = static_cast<const cuda::GroupTile*>(
        args_->put(tiles_.data(), tiles_.size() * sizeof(cuda::GroupTile)));
    const int64_t n_tiles = static_cast<int64_t>(tiles_.size());
    if (q8)
      cuda::launch_matmul_grouped_q8(shape, d_tiles, n_tiles, xa, lo, y, stream_);
    else
      cuda::launch_matmul_grouped(shape, d_tiles, n_tiles, xa, lo, y, stream_);
  }

  void add_bias(float* y, const float* b, int64_t M, int64_t n) override {
    cuda::launch_add_bias(y, b, M, n, stream_);
  }

  void add(float* y, const float* x, int64_t n) override { cuda::launch_add(y, x, n, stream_); }

  void zero(float* x, int64_t n) override {
    cuda::check(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(float), stream_), "zero");
    cuda::note_launch();
  }

  void scale(float* x, int64_t n, float s) override {
    if (n > 0) cuda::launch_scale(x, n, s, stream_);
  }

  void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
                 int64_t n) override {
    if (rows > 0 && n > 0)
      cuda::launch_copy_heads(dst, dst_stride, 0, src, src_stride, 0, rows, 1, n, stream_);
  }

  // The M x n_heads products as the GEMVs of one launch under an index whose experts are the head
  // blocks (as matmul_indexed runs a token's experts): inputs gathered into rows of w.cols first
  // where they lie apart, outputs put in place after where theirs do.
  void matmul_heads(const Weight& w, int64_t n_heads, const float* x, int64_t x_stride,
                    int64_t x_head, int64_t M, float* y, int64_t y_stride,
                    int64_t y_head) override {
    if (n_heads < 1 || n_heads > kMaxGridY || w.rows % n_heads != 0)
      fail(ErrorKind::Unsupported,
           "matmul_heads: " + str(w.rows) + " rows in " + str(n_heads) + " heads");
    const int64_t rows = w.rows / n_heads, cols = w.cols;
    // Every head's block lies like the first (the index's rule): same alignment, whole groups of a
    // packed layout.
    if (rows % weight_row_group(w.dtype) != 0 || static_cast<size_t>(rows) * w.row_stride % 16 != 0)
      fail(ErrorKind::Unsupported, "matmul_heads: heads of " + str(rows) + " rows of " +
                                       std::to_string(w.row_stride) +
                                       " bytes (CUDA: whole 16-byte multiples and row groups)");
    if (M <= 0) return;
    Weight head = w;
    head.rows = rows;
    const void* const* table = head_table(w, n_heads);
    const int32_t* ids = head_ids(n_heads);
    // Rows of x a launch takes: as many as a grid holds, fewer where their gathered rows would
    // pass kHeadsScratchBytes (a prefill's rows, not a decode step's).
    const int64_t row_bytes = n_heads * (cols + rows) * static_cast<int64_t>(sizeof(float));
    const int64_t per_launch =
        std::clamp<int64_t>(kHeadsScratchBytes / row_bytes, 1, kMaxGridY / n_heads);
    for (int64_t m0 = 0; m0 < M; m0 += per_launch) {
      const int64_t m = std::min(per_launch, M - m0), n = m * n_heads;
      const float* xm = x + m0 * x_stride;
      float* ym = y + m0 * y_stride;
      const bool x_packed = x_head == cols && (m == 1 || x_stride == n_heads * cols);
      const bool y_packed = y_head == rows && (m == 1 || y_stride == n_heads * rows);
      auto* buf = static_cast<float*>(heads_->get(
          static_cast<size_t>(n * ((x_packed ? 0 : cols) + (y_packed ? 0 : rows))) * sizeof(float),
          "matmul_heads rows"));
      const float* xin = xm;
      if (!x_packed) {
        cuda::launch_copy_heads(buf, n_heads * cols, cols, xm, x_stride, x_head, m, n_heads, cols,
                                stream_);
        xin = buf;
      }
      float* yout = y_packed ? ym : buf + (x_packed ? 0 : n * cols);
      const cuda::ExpertIndex ix = index(table, ids, n, cols, 1, nullptr);
      if (cuda::gemv_int8_supported(head, sm_major_))
        int8_gemv(head, xin, 1, yout, ix);
      else
        cuda::launch_gemv(head, xin, yout, stream_, ix);
      if (!y_packed)
        cuda::launch_copy_heads(ym, y_stride, y_head, yout, n_heads * rows, rows, m, n_heads, rows,
                                stream_);
    }
  }

  void rope(float* x, int64_t M, int64_t n_heads, const int32_t* pos, const RopeArgs& r) override {
    check_rope(r);
    // M-RoPE: three positions a row and each pair's stream, both uploaded as arguments (a recorded
    // step re-reads the positions; the streams are the engine's, the same every step).
    const bool mrope = r.pair_stream != nullptr;
    const auto* d_pos =
        static_cast<const int32_t*>(args_->put(pos, sizeof(int32_t) * M * (mrope ? 3 : 1)));
    const uint8_t* d_streams = nullptr;
    if (mrope) {
      const auto pairs = static_cast<size_t>(r.rotary_dim / 2);
      d_streams = static_cast<const uint8_t*>(args_->put(r.pair_stream, pairs));
    }
    cuda::launch_rope(x, M, n_heads, d_pos, d_streams, r, stream_);
  }

  void rope_kv_store(float* qkv, const float* q_w, const float* k_w, int64_t n_q, int64_t n_k,
                     float eps, bool plus_one, const int32_t* pos, const RopeArgs& r,
                     const KvView& kv) override {
    const bool norm = q_w != nullptr, fused = cuda::rope_kv_store_fused(r, norm);
    if (!fused && !(norm && cuda::qk_norm_rope_fused(r.head_dim)))
      return Backend::rope_kv_store(qkv, q_w, k_w, n_q, n_k, eps, plus_one, pos, r, kv);
    check_rope(r);
    check_kv(kv, "rope_kv_store");
    if (kv.width != n_k * r.head_dim)
      fail(ErrorKind::Runtime, "rope_kv_store: KV row of " + str(kv.width) + " elements for " +
                                   str(n_k) + " key heads of " + str(r.head_dim));
    check_positions(kv, pos, 1, "rope_kv_store");
    const auto* d_pos = static_cast<const int32_t*>(args_->put(pos, sizeof(int32_t)));
    if (fused)
      return cuda::launch_rope_kv_store(qkv, q_w, k_w, n_q, n_k, eps, plus_one, d_pos, r, kv,
                                        stream_);
    const float* k = qkv + n_q * r.head_dim;
    cuda::launch_qk_norm_rope(qkv, q_w, k_w, n_q, n_k, eps, plus_one, d_pos, r, stream_);
    cuda::launch_kv_store(kv, nullptr, k, k + n_k * r.head_dim, 1, d_pos, stream_);
  }

  void kv_store(const KvView& kv, const float* k, const float* v, int64_t M,
                const int32_t* pos) override {
    check_kv(kv, "kv_store");
    check_positions(kv, pos, M, "kv_store");
    check_rows(M, "kv_store");
    const auto* d_pos = static_cast<const int32_t*>(args_->put(pos, sizeof(int32_t) * M));
    cuda::launch_kv_store(kv, nullptr, k, v, M, d_pos, stream_);
  }

  void kv_store_each(const KvView* kv, const float* k, const float* v, int64_t M,
                     const int32_t* pos) override {
    if (!same_layout(kv, M)) return Backend::kv_store_each(kv, k, v, M, pos);
    check_kv(kv[0], "kv_store");
    for (int64_t m = 0; m < M; ++m) check_positions(kv[m], pos + m, 1, "kv_store");
    check_rows(M, "kv_store");
    const auto* d_kv = static_cast<const KvView*>(args_->put(kv, sizeof(KvView) * M));
    const auto* d_pos = static_cast<const int32_t*>(args_->put(pos, sizeof(int32_t) * M));
    cuda::launch_kv_store(kv[0], d_kv, k, v, M, d_pos, stream_);
  }

  void attention(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                 const AttentionArgs& a, float* out) override {
    check_attention(kv, a);
    check_positions(kv, pos, M, "attention");
    check_rows(M, "attention");
    const auto* d_pos = static_cast<const int32_t*>(args_->put(pos, sizeof(int32_t) * M));
    AttentionArgs d = a;  // the kernels read key_end in device memory
    if (a.key_end != nullptr) {
      check_key_end(kv, a.key_end, M);
      d.key_end = static_cast<const int32_t*>(args_->put(a.key_end, sizeof(int32_t) * M));
    }
    if (M > 1) {
      cuda::launch_attention_prefill(q, kv, M, d_pos, d, out, stream_);
      return;
    }
    attention_decode(q, kv, nullptr, 1, d_pos, d, out);
  }

  void attention_each(const float* q, const KvView* kv, int64_t M, const int32_t* pos,
                      const AttentionArgs& a, float* out) override {
    if (a.key_end != nullptr)
      fail(ErrorKind::Unsupported, "attention_each: key_end (a decode step's rows are causal)");
    if (!same_layout(kv, M) || a.n_head * M > cuda::kMaxDecodeHeads)
      return Backend::attention_each(q, kv, M, pos, a, out);
    check_attention(kv[0], a);
    for (int64_t m = 0; m < M; ++m) check_positions(kv[m], pos + m, 1, "attention");
    const auto* d_kv = static_cast<const KvView*>(args_->put(kv, sizeof(KvView) * M));
    const auto* d_pos = static_cast<const int32_t*>(args_->put(pos, sizeof(int32_t) * M));
    attention_decode(q, kv[0], d_kv, M, d_pos, a, out);
  }

  void glu(Glu act, const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
           float* out) override {
    produce(out, rows, n, [&](void* acts) {
      return cuda::launch_glu(act, gate, up, rows, n, stride, out, stream_, acts);
    });
  }

  void glu_clamped(const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
                   const ClampedSwiGlu& p, float* out) override {
    cuda::launch_glu_clamped(gate, up, rows, n, stride, p, out, stream_);
  }

  void conv_silu(float* x, int64_t M, int64_t channels, const float* taps, int64_t kernel,
                 float* window) override {
    if (kernel < 1 || kernel > cuda::kMaxConvKernel)
      fail(ErrorKind::Unsupported, "conv_silu: a kernel of " + str(kernel) + " taps (1 to " +
                                       str(cuda::kMaxConvKernel) + " run on CUDA)");
    if (M <= 0 || channels <= 0) return;
    cuda::launch_conv_silu(x, M, channels, taps, kernel, window, stream_);
  }

  void delta_rule(const float* qkv, const float* beta, const float* alpha, int64_t M,
                  const DeltaRuleArgs& a, float* state, float* out) override {
    if (a.n_k_heads <= 0 || a.n_v_heads <= 0 || a.n_v_heads % a.n_k_heads != 0)
      fail(ErrorKind::Unsupported, "delta_rule: " + str(a.n_v_heads) + " value heads over " +
                                       str(a.n_k_heads) + " key heads");
    if (a.k_head_dim <= 0 || a.k_head_dim > cuda::kMaxDeltaHeadDim || a.v_head_dim <= 0)
      fail(ErrorKind::Unsupported, "delta_rule: key heads of " + str(a.k_head_dim) +
                                       " and value heads of " + str(a.v_head_dim) +
                                       " elements (key heads of 1 to " +
                                       str(cuda::kMaxDeltaHeadDim) + " run on CUDA)");
    if (M <= 0) return;
    cuda::launch_delta_rule(qkv, beta, alpha, M, a, state, out, stream_);
  }

  void add_gated_rows(float* y, const float* x, const float* g, int64_t M, int64_t n) override {
    if (M <= 0 || n <= 0) return;
    cuda::launch_add_gated_rows(y, x, g, M, n, stream_);
  }

  void scatter_add_rows(float* y, const float* x, const int32_t* idx, const float* scale, int64_t M,
                        int64_t n) override {
    const auto* d_scale = static_cast<const float*>(args_->put(scale, sizeof(float) * M));
    // While a step is recorded, the arguments must be the caller's own arrays (a replay re-reads
    // them): the serial kernel, which reads idx as given.
    if (args_->recording()) {
      const auto* d_idx = static_cast<const int32_t*>(args_->put(idx, sizeof(int32_t) * M));
      cuda::launch_scatter_add_rows(y, x, d_idx, d_scale, M, n, stream_);
      return;
    }
    // Otherwise the source rows grouped by destination (stable: each destination keeps the
    // callers' order), so that the destinations are summed in parallel: a micro-batch's routed
    // experts put k rows on each of M destinations.
    scatter_dst_.clear();
    scatter_off_.assign(1, 0);
    scatter_src_.resize(static_cast<size_t>(M));
    std::vector<int32_t> order(static_cast<size_t>(M));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return idx[a] < idx[b]; });
    for (int64_t j = 0; j < M; ++j) {
      const int32_t m = order[static_cast<size_t>(j)];
      if (scatter_dst_.empty() || scatter_dst_.back() != idx[m]) {
        if (!scatter_dst_.empty()) scatter_off_.push_back(static_cast<int32_t>(j));
        scatter_dst_.push_back(idx[m]);
      }
      scatter_src_[static_cast<size_t>(j)] = m;
    }
    scatter_off_.push_back(static_cast<int32_t>(M));
    const int64_t D = static_cast<int64_t>(scatter_dst_.size());
    const auto* d_dst =
        static_cast<const int32_t*>(args_->put(scatter_dst_.data(), sizeof(int32_t) * D));
    const auto* d_off =
        static_cast<const int32_t*>(args_->put(scatter_off_.data(), sizeof(int32_t) * (D + 1)));
    const auto* d_src =
        static_cast<const int32_t*>(args_->put(scatter_src_.data(), sizeof(int32_t) * M));
    for (int64_t d0 = 0; d0 < D; d0 += kMaxGridY)
      cuda::launch_scatter_add_sorted(y, x, d_dst + d0, d_off + d0, d_src, d_scale,
                                      std::min(kMaxGridY, D - d0), n, stream_);
  }

  void gather_rows(const float* x, const int32_t* idx, int64_t M, int64_t n, float* out) override {
    const auto* d_idx = static_cast<const int32_t*>(args_->put(idx, sizeof(int32_t) * M));
    cuda::launch_gather_rows(x, d_idx, M, n, out, stream_);
  }

  void softcap(float* x, int64_t n, float cap) override {
    cuda::launch_softcap(x, n, cap, stream_);
  }

  void nll_rows(const float* logits, int64_t n, int64_t V, const int32_t* targets,
                double* nll) override {
    if (n <= 0) return;
    const auto bytes = static_cast<size_t>(n) * sizeof(double);
    const auto* d_targets =
        static_cast<const int32_t*>(args_->put(targets, static_cast<size_t>(n) * sizeof(int32_t)));
    auto* out = static_cast<double*>(nll_->get(bytes, "token scores"));
    cuda::launch_nll_rows(logits, n, V, d_targets, out, stream_);
    to_host(nll, out, bytes);
  }

  void route(const float* logits, int64_t M, const RouterArgs& a, int32_t* ids,
             float* weights) override {
    if (a.k < 1 || a.k > cuda::kMaxTopK || a.k > a.n_expert ||
        a.n_expert > cuda::kMaxDeviceRoutedExperts)
      fail(ErrorKind::Unsupported,
           "route: top-" + str(a.k) + " of " + str(a.n_expert) +
               " experts (the CUDA kernel takes top-k <= " + str(cuda::kMaxTopK) +
               " of <= " + str(cuda::kMaxDeviceRoutedExperts) + ")");
    check_rows(M, "route");
    cuda::launch_route(logits, M, a, ids, weights, stream_);
  }

  bool indexes_experts_on_device() const override { return true; }

  void matmul_indexed(const Weight& shape, const void* const* experts, const int32_t* ids,
                      int64_t n, const float* x, int64_t x_stride, int64_t experts_per_x,
                      float* y) override {
    const cuda::ExpertIndex ix = index(experts, ids, n, x_stride, experts_per_x, nullptr);
    if (cuda::gemv_int8_supported(shape, sm_major_)) {
      int8_gemv(shape, x, 1, y, ix);
    } else {
      cuda::launch_gemv(shape, x, y, stream_, ix);
    }
  }

  void matmul_indexed_filling(const Weight& shape, const void* const* experts, void* const* fill,
                              const int32_t* ids, int64_t n, const float* x, int64_t x_stride,
                              int64_t experts_per_x, float* y) override {
    if (!plain_type(shape.dtype))
      fail(ErrorKind::Unsupported, std::string("expert paging: ") + dtype_name(shape.dtype) +
                                       " weights are not paged on the device");
    if (cuda::gemv_loads_chunks(shape, x, x_stride)) {
      cuda::launch_gemv(shape, x, y, stream_,
                        index(experts, ids, n, x_stride, experts_per_x, fill));
      return;
    }
    matmul_indexed(shape, experts, ids, n, x, x_stride, experts_per_x, y);
    cuda::launch_fill_experts(shape, experts, fill, ids, n, stream_);
  }

  // Plain weights: the GEMV stores what it loads (the quantised GEMVs stage rows through shared
  // memory and would need a store path of their own).
  bool pages_experts(DType type) const override { return plain_type(type); }

  void page_experts(const ExpertPages& p, const int32_t* ids, int64_t k) override {
    cuda::launch_page_experts(p, ids, k, stream_);
  }

  void commit_experts(const ExpertPages& p, const int32_t* ids, int64_t k) override {
    cuda::launch_commit_experts(p, ids, k, stream_);
  }

  void combine_experts(const float* y, const int32_t* ids, const float* weights, int64_t M,
                       int64_t k, int64_t n, float* out) override {
    check_experts_per_row(k, "combine_experts");
    check_rows(M, "combine_experts");
    cuda::launch_combine_experts({y, ids, weights, static_cast<int>(k)}, M, n, out, stream_);
  }

  void combine_add_rms_norm(const float* y, const int32_t* ids, const float* weights, int64_t k,
                            float* x, const float* w, int64_t M, int64_t n, float eps,
                            bool plus_one, float* sum, float* out) override {
    check_experts_per_row(k, "combine_add_rms_norm");
    const cuda::RoutedRows routed{y, ids, weights, static_cast<int>(k)};
    if (!cuda::combine_add_rms_norm_fused(routed, x, w, n, out))
      return Backend::combine_add_rms_norm(y, ids, weights, k, x, w, M, n, eps, plus_one, sum, out);
    produce(out, M, n, [&](void* acts) {
      return cuda::launch_combine_add_rms_norm(routed, x, w, M, n, eps, plus_one, out, stream_,
                                               acts);
    });
  }

 private:
  // matmul_heads' index: per weight, its head blocks' addresses (device memory, made by the eager
  // first call, so that a recorded step finds them), and per head count the ids i % n_heads of
  // as many GEMVs as a launch takes.
  const void* const* head_table(const Weight& w, int64_t n_heads) {
    const auto key = std::make_tuple(w.data, w.rows, w.row_stride, n_heads);
    auto& buf = head_tables_[key];
    if (buf == nullptr) {
      const int64_t rows = w.rows / n_heads;
      std::vector<const void*> heads(static_cast<size_t>(n_heads));
      for (int64_t h = 0; h < n_heads; ++h)
        heads[static_cast<size_t>(h)] =
            static_cast<const uint8_t*>(w.data) + static_cast<size_t>(h * rows) * w.row_stride;
      buf = std::make_unique<cuda::DeviceBuffer>(stream_);
      const size_t bytes = heads.size() * sizeof(void*);
      to_device(buf->get(bytes, "matmul_heads table"), heads.data(), bytes);
    }
    return static_cast<const void* const*>(buf->get(0, "matmul_heads table"));
  }

  const int32_t* head_ids(int64_t n_heads) {
    auto& buf = head_ids_[n_heads];
    if (buf == nullptr) {
      std::vector<int32_t> ids(static_cast<size_t>(kMaxGridY / n_heads * n_heads));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % n_heads);
      buf = std::make_unique<cuda::DeviceBuffer>(stream_);
      const size_t bytes = ids.size() * sizeof(int32_t);
      to_device(buf->get(bytes, "matmul_heads ids"), ids.data(), bytes);
    }
    return static_cast<const int32_t*>(buf->get(0, "matmul_heads ids"));
  }

  // The ExpertIndex of a matmul_indexed call, its counts checked.
  static cuda::ExpertIndex index(const void* const* experts, const int32_t* ids, int64_t n,
                                 int64_t x_stride, int64_t experts_per_x, void* const* fill) {
    if (n < 1 || n > kMaxGridY)
      fail(ErrorKind::Unsupported, "matmul_indexed: " + str(n) + " experts in one call");
    check_experts_per_x(n, experts_per_x);
    return {experts, ids, n, x_stride, fill, static_cast<unsigned>(experts_per_x)};
  }

  struct Recording {
    StepKey key;
    std::unique_ptr<cuda::StepGraph> graph;  // null if the capture failed
    uint64_t scratch = 0;                    // scratch_generation() when captured
    uint64_t last_use = 0;
  };

  Recording* find_recording(const StepKey& key) {
    for (Recording& r : recordings_)
      if (r.key == key) return &r;
    return nullptr;
  }

  // Drops the least recently replayed of the recordings `which` selects (one at least).
  void forget_least_recent(const std::function<bool(const Recording&)>& which) {
    auto oldest = recordings_.end();
    for (auto r = recordings_.begin(); r != recordings_.end(); ++r)
      if (which(*r) && (oldest == recordings_.end() || r->last_use < oldest->last_use)) oldest = r;
    recordings_.erase(oldest);
  }

  uint64_t scratch_generation() const {
    return partials_->generation() + int8_acts_->generation() + heads_->generation();
  }

  // Runs the eager first pass of a new key (and returns null), or captures the second pass.
  Recording* record(const StepKey& key, const std::function<void()>& ops) {
    auto warm = std::find_if(warmups_.begin(), warmups_.end(),
                             [&](const auto& w) { return w.first == key; });
    if (warm == warmups_.end()) {
      const size_t before = args_->put_bytes();
      ops();
      if (warmups_.size() >= kMaxGraphs) warmups_.erase(warmups_.begin());
      warmups_.emplace_back(key, args_->put_bytes() - before);
      return nullptr;
    }
    const size_t arg_bytes = warm->second;
    warmups_.erase(warm);
    const auto batched = [](const Recording& r) { return r.key.states.size() > 1; };
    if (key.states.size() > 1 &&
        static_cast<size_t>(std::count_if(recordings_.begin(), recordings_.end(), batched)) >=
            kMaxBatchedGraphs) {
      forget_least_recent(batched);
    } else if (recordings_.size() >= kMaxGraphs) {
      forget_least_recent([](const Recording&) { return true; });
    }
    Recording rec;
    rec.key = key;
    rec.graph = std::make_unique<cuda::StepGraph>(stream_, arg_bytes);
    rec.scratch = scratch_generation();
    args_->record_into(&rec.graph->args());
    std::string why;
    const bool captured = rec.graph->capture(ops, why);
    args_->record_into(nullptr);
    if (!captured) {
      std::fprintf(stderr,
                   "turbospark: a decode step could not be recorded as a CUDA graph (%s); "
                   "running it eagerly\n",
                   why.c_str());
      rec.graph.reset();
    }
    recordings_.push_back(std::move(rec));
    return &recordings_.back();
  }

  static void check_rope(const RopeArgs& r) {
    if (r.rotary_dim % 2 != 0 || r.rotary_dim > r.head_dim || r.rotary_dim <= 0)
      fail(ErrorKind::Unsupported, "rope: rotary dimension " + str(r.rotary_dim) +
                                       " must be even and within head_dim " + str(r.head_dim));
  }

  static void check_experts_per_row(int64_t k, const char* op) {
    if (k < 1 || k > cuda::kMaxTopK)
      fail(ErrorKind::Unsupported, std::string(op) + ": " + str(k) + " experts per row");
  }

  static void check_rows(int64_t M, const char* op) {
    if (M > kMaxGridY)
      fail(ErrorKind::Unsupported,
           std::string(op) + ": " + str(M) + " rows in one call exceed " + str(kMaxGridY));
  }

  static void check_kv(const KvView& kv, const char* op) {
    const bool known = kv.dtype == DType::F32 || kv.dtype == DType::F16 ||
                       kv.dtype == DType::BF16 || kv.dtype == DType::Q8_0;
    if (!known)
      fail(ErrorKind::Unsupported,
           std::string(op) + ": KV cache type " + dtype_name(kv.dtype) + " is not supported");
    if (row_bytes(kv.dtype, static_cast<uint64_t>(kv.width), op) > kv.row_bytes)
      fail(ErrorKind::Runtime, std::string(op) + ": KV row of " + str(kv.width) +
                                   " elements does not fit " + std::to_string(kv.row_bytes) +
                                   " bytes");
  }

  static void check_attention(const KvView& kv, const AttentionArgs& a) {
    check_kv(kv, "attention");
    if (a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0 || a.head_dim * a.n_head_kv != kv.width)
      fail(ErrorKind::Unsupported, "attention: " + str(a.n_head) + " heads over " +
                                       str(a.n_head_kv) + " kv heads of " + str(a.head_dim) +
                                       " do not fit a cache row of " + str(kv.width));
    check_head_dim(a.head_dim);
  }

  static void check_key_end(const KvView& kv, const int32_t* key_end, int64_t M) {
    for (int64_t m = 0; m < M; ++m)
      if (key_end[m] > kv.capacity)
        fail(ErrorKind::Input, "attention: key_end " + str(key_end[m]) +
                                   " is past the KV cache of " + str(kv.capacity));
  }

  // The head sizes the attention kernels take; checked at open too (scratch_bytes), so that a
  // model the kernels cannot run is refused before anything is allocated.
  static void check_head_dim(int64_t head_dim) {
    if (head_dim > cuda::kMaxAttentionHeadDim)
      fail(ErrorKind::Unsupported, "attention: head_dim " + str(head_dim) +
                                       " exceeds the CUDA kernels' " +
                                       str(cuda::kMaxAttentionHeadDim));
    // The decode kernel loads a head's cache slice in runs of 8 elements.
    if (head_dim % 8 != 0)
      fail(ErrorKind::Unsupported,
           "attention: head_dim " + str(head_dim) + " is not a multiple of 8 (CUDA kernels)");
  }

  // Whether the M caches share a type and a row layout, as one launch over all of them needs
  // (the caches of one model do).
  static bool same_layout(const KvView* kv, int64_t M) {
    for (int64_t m = 1; m < M; ++m)
      if (kv[m].dtype != kv[0].dtype || kv[m].width != kv[0].width ||
          kv[m].row_bytes != kv[0].row_bytes)
        return false;
    return true;
  }

  // The int8 GEMVs' inputs quantised once: a norm, GLU or decode attention whose output buffer
  // int8 GEMVs have read writes it quantised too (into the int8 scratch), and a GEMV that finds the
  // scratch holding its rows, with no work launched since the kernel that put them there, skips
  // its quantisation kernel (a launch and a dependent step on the token's critical path;
  // DESIGN-NOTES "CUDA backend"). `launch(acts)` runs the producer's kernel, given the
  // scratch (null where nothing would read its output so), and says whether it wrote it.
  template <class Launch>
  void produce(const float* out, int64_t rows, int64_t n, Launch&& launch) {
    void* acts = nullptr;
    if (rows <= cuda::kGemvRows && std::find(int8_inputs_.begin(), int8_inputs_.end(),
                                             std::make_pair(out, n)) != int8_inputs_.end())
      acts = int8_acts_->get(cuda::gemv_int8_scratch_bytes(rows * n), "int8 activations");
    quantised_ = launch(acts) ? QuantisedActs{out, rows, n, cuda::launches()} : QuantisedActs{};
  }

  // The int8 GEMV of M activation rows (one under an index): it skips the quantisation where the
  // scratch holds its input rows and nothing has run since, and leaves them there.
  void int8_gemv(const Weight& w, const float* x, int64_t M, float* y,
                 const cuda::ExpertIndex& ix) {
    if (std::find(int8_inputs_.begin(), int8_inputs_.end(), std::make_pair(x, w.cols)) ==
        int8_inputs_.end())
      int8_inputs_.emplace_back(x, w.cols);
    const int64_t x_rows = cuda::gemv_int8_input_rows(M, ix);
    void* acts =
        int8_acts_->get(cuda::gemv_int8_scratch_bytes(x_rows * w.cols), "int8 activations");
    const bool ready = quantised_.of == x && quantised_.rows == x_rows &&
                       quantised_.cols == w.cols && quantised_.at == cuda::launches();
    cuda::launch_gemv_int8(w, x, M, y, acts, ready, stream_, ix);
    quantised_ = {x, x_rows, w.cols, cuda::launches()};  // the GEMV only read x
  }

  // Decode attention of M rows, one each over kv (each = null, M = 1) or over each[m].
  void attention_decode(const float* q, const KvView& kv, const KvView* each, int64_t M,
                        const int32_t* d_pos, const AttentionArgs& a, float* out) {
    const int splits = decode_splits(a);
    void* scratch =
        partials_->get(cuda::attention_decode_scratch_bytes(a.n_head * M, splits, a.head_dim),
                       "attention partials");
    produce(out, M, a.n_head * a.head_dim, [&](void* acts) {
      return cuda::launch_attention_decode(q, kv, each, M, d_pos, a, splits,
                                           cuda::kDecodeNarrowKeys, scratch, out, stream_, acts);
    });
  }

  static void check_positions(const KvView& kv, const int32_t* pos, int64_t M, const char* op) {
    for (int64_t m = 0; m < M; ++m)
      if (pos[m] < 0 || pos[m] >= kv.capacity)
        fail(ErrorKind::Input, std::string(op) + ": position " + str(pos[m]) +
                                   " is outside the KV cache of " + str(kv.capacity));
  }

  // Key ranges per head for decode at most: about four blocks per multiprocessor in all at long
  // contexts, a block taking the query heads of one kv head (decode_heads_per_block). The grid
  // does not depend on the position, so that a recorded decode step stays valid as the context
  // grows; the kernel uses a range per 128 keys and the blocks of the others leave at once.
  int decode_splits(const AttentionArgs& a) const {
    const int64_t blocks =
        a.n_head / cuda::decode_heads_per_block(a.n_head, a.n_head_kv, a.head_dim);
    const int64_t wanted = (int64_t{4} * sm_count_ + blocks - 1) / blocks;
    return static_cast<int>(std::clamp<int64_t>(wanted, 1, cuda::kMaxDecodeSplits));
  }

  int device_;
  int sm_count_ = 0;
  int sm_major_ = 0;
  size_t max_smem_ = 0;  // shared memory a block may opt in to
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // async host-to-device copies (expert streaming)
  cudaEvent_t compute_mark_ = nullptr;  // copy_after_compute()'s point on stream_
  std::vector<cudaEvent_t> copy_events_;
  uint64_t copies_ = 0;  // tickets issued
  std::unique_ptr<cuda::ArgStage> args_;
  std::unique_ptr<cuda::Gemm> gemm_;
  std::unique_ptr<cuda::DeviceBuffer> partials_;
  std::unique_ptr<cuda::DeviceBuffer> int8_acts_;  // quantised activations of the int8 GEMV
  // What int8_acts_ holds: `rows` x `cols` activations of `of`, put there by the work launched last
  // when `at` was read (cuda::launches()).
  struct QuantisedActs {
    const float* of = nullptr;
    int64_t rows = 0, cols = 0;
    uint64_t at = 0;
  };
  QuantisedActs quantised_;
  // Activation buffers (with their row length) that int8 GEMVs have read: the norms and the GLU
  // quantise only their outputs into those (a bf16 model's have nothing to gain).
  std::vector<std::pair<const float*, int64_t>> int8_inputs_;
  std::unique_ptr<cuda::DeviceBuffer> grouped_acts_;  // 16-bit activations of matmul_grouped
  std::unique_ptr<cuda::DeviceBuffer> nll_;           // nll_rows' values
  std::unique_ptr<cuda::DeviceBuffer> heads_;         // matmul_heads' gathered inputs and outputs
  std::map<std::tuple<const void*, int64_t, size_t, int64_t>, std::unique_ptr<cuda::DeviceBuffer>>
      head_tables_;
  std::map<int64_t, std::unique_ptr<cuda::DeviceBuffer>> head_ids_;
  std::vector<cuda::GroupTile> tiles_;                            // matmul_grouped's row tiles
  std::vector<int32_t> scatter_dst_, scatter_off_, scatter_src_;  // scatter_add_rows by destination
  bool graphs_enabled_ = true;
  std::vector<std::pair<StepKey, size_t>> warmups_;  // keys run once eagerly, and their arg bytes
  std::vector<Recording> recordings_;
  uint64_t replays_ = 0;
};

}  // namespace

}  // namespace ts

// The plugin's entry points (libturbospark_cuda.so), found with dlsym by backend/cuda_loader.cpp.
// Keeping CUDA in a plugin spares every CPU run the ~200 MiB that loading cuBLAS costs.
extern "C" int turbospark_cuda_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

extern "C" ts::Backend* turbospark_cuda_create(int device) {
  using ts::ErrorKind;
  using ts::fail;
  const int count = turbospark_cuda_device_count();
  if (count == 0) fail(ErrorKind::Usage, "--backend cuda: no CUDA device is present");
  if (device < 0 || device >= count)
    fail(ErrorKind::Usage, "--device " + std::to_string(device) + ": only " +
                               std::to_string(count) + " CUDA device(s) present");
  return new ts::CudaBackend(device);
}
