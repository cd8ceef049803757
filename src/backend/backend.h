// Backend: buffers and the op set (docs/ARCHITECTURE.md). The forward driver (runtime/) calls only
// these ops, on buffers the backend allocated, so one driver runs on the CPU and on CUDA.
// Activations are f32, row-major [M][width]; M is the number of tokens in a micro-batch (1 for
// decode). The backend knows nothing about families: every behaviour arrives as an explicit
// argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/routing.h"
#include "backend/weight_layout.h"
#include "quant/dtype.h"

namespace ts {

// A weight matrix in backend memory: `rows` rows of `cols` elements, `row_stride` bytes each, in
// the file's row layout unless the backend packed it (Backend::pack_weight).
struct Weight {
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;
  const void* data = nullptr;
  WeightLayout layout = WeightLayout::Rows;
};

// How rotary embeddings rotate: `inv_freq` holds rotary_dim / 2 frequencies in backend memory.
struct RopeArgs {
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;
  bool neox = true;  // pairs (i, i + rotary_dim/2); false: adjacent pairs (2i, 2i+1)
  const float* inv_freq = nullptr;
  // M-RoPE: per frequency pair (rotary_dim / 2 of them, host memory), which of a row's three
  // positions rotates it; the positions are then [M][3]. nullptr: one position a row.
  const uint8_t* pair_stream = nullptr;
};

// One layer of a KV cache: `capacity` rows of `width` (= n_head_kv * head_dim) elements.
struct KvView {
  DType dtype = DType::F16;
  int64_t capacity = 0;
  int64_t width = 0;
  size_t row_bytes = 0;
  void* k = nullptr;
  void* v = nullptr;
};

struct AttentionArgs {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  float scale = 0;
  float softcap = 0;   // 0 = none
  int64_t window = 0;  // 0 = full causal; else keys j with pos - window < j <= pos
  // Per query head, a logit that joins the softmax's denominator and has no value (gpt-oss's
  // attention sinks), backend memory; null: none.
  const float* sinks = nullptr;
  // Per query row, host memory: keys j < key_end[m] where that is past pos[m] + 1 (the later rows
  // of the row's image, which Gemma 3 attends to both ways); the window still bounds j from
  // below. Null: causal.
  const int32_t* key_end = nullptr;
};

// gpt-oss's SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
// out = (u + 1) * g * sigmoid(alpha * g).
struct ClampedSwiGlu {
  float alpha = 0;
  float limit = 0;
};

// The activation of a gated product act(gate) * up: SiLU (SwiGLU), GELU with the tanh
// approximation (GeGLU), or the logistic sigmoid (an attention output gate).
enum class Glu { SiLU, GeluTanh, Sigmoid };

// Gated DeltaNet's recurrence (Backend::delta_rule). The state of one sequence and layer is
// [n_v_heads][k_head_dim][v_head_dim] f32; `a` (-exp(A_log)) and `dt_bias` hold n_v_heads values
// in backend memory.
struct DeltaRuleArgs {
  int64_t n_k_heads = 0;
  int64_t n_v_heads = 0;
  int64_t k_head_dim = 0;
  int64_t v_head_dim = 0;
  bool v_heads_tiled = false;  // value head h reads key head h % n_k_heads, else h / (n_v / n_k)
  const float* a = nullptr;
  const float* dt_bias = nullptr;
};

// Names one recordable step (see Backend::run_recorded): the object that issues it, the states it
// works on (one per sequence of a batched step, in its order), and a variant for anything else
// that changes which ops it queues.
struct StepKey {
  const void* owner = nullptr;
  std::vector<const void*> states;
  int64_t variant = 0;
  bool operator==(const StepKey&) const = default;
};

// Experts paged on the device (Backend::page_experts): one MoE layer's state, all in backend
// memory, owned by the ExpertStore. Every expert lives in host memory the device can read
// (`host`); a few also in VRAM slots. The layer's table entries point at an expert's slot when it
// has one, else at its host bytes.
struct ExpertPages {
  int64_t n_expert = 0;
  int64_t n_slots = 0;
  int32_t* slot_of = nullptr;  // [n_expert]: the slot holding the expert, or -1
  int32_t* owner = nullptr;    // [n_slots]: the expert a slot holds, or -1
  uint32_t* stamp = nullptr;   // [n_slots + 1]: each slot's last step; [n_slots]: the step
  uint64_t* counts = nullptr;  // [2]: hits, misses
  const void* const* host =
      nullptr;                   // [n_expert]: the expert's bytes in device-readable host memory
  void* const* slot = nullptr;   // [n_slots]: each slot's memory
  const void** table = nullptr;  // [3][n_expert]: the layer's gate, up and down entries
  void** fill = nullptr;         // [3][n_expert]: where a matmul stores the rows it reads, or null
  size_t offset[3] = {};         // of the gate, up and down bytes within an expert's
};

// What a device backend's hardware can do at best, measured: device-to-device copy bandwidth (bytes
// read + written per second), the bf16 tensor-core GEMM rate, and pinned host-to-device copy
// bandwidth (what streamed experts cross). Zero for host backends, whose ceilings
// runtime/bandwidth.h measures.
struct DeviceCeilings {
  double copy_bytes_per_s = 0;
  double gemm_flops = 0;
  double h2d_bytes_per_s = 0;
};

// The matmuls a model's forward pass will ask of a backend, for the backend to bound the memory it
// holds for itself (Backend::scratch_bytes). Shapes are weights as the pass multiplies them:
// stacked ones (q/k/v, gate/up) as well as their parts.
struct MatmulShape {
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
};

struct ScratchPlan {
  int64_t max_rows = 1;  // rows of a micro-batch
  int64_t n_layer = 0;
  std::vector<MatmulShape> dense;    // every weight a micro-batch multiplies, the head included
  std::vector<MatmulShape> experts;  // routed experts' projections (MoE); empty for dense models
  int64_t n_expert = 0;
  int64_t experts_per_token = 0;
  // Sequences of a decode step (one token each) that the backend may run as one: the rows of its
  // attention and of a recorded step, and the tokens whose experts one matmul_indexed runs
  // (unless experts_one_at_a_time).
  int64_t decode_step_rows = 1;
  bool experts_one_at_a_time = false;  // streamed experts run alone as their slots fill
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t ctx = 0;  // the most cached positions one sequence's attention reads
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Memory. alloc() returns zeroed memory; free(nullptr) is a no-op.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  // The most bytes of device memory the backend has held at once, its scratch included (0 for a
  // backend in host memory, whose peak is the process's resident set).
  virtual uint64_t device_peak_bytes() const { return 0; }
  // The most memory the backend allocates for itself while running `plan`, beside what goes
  // through alloc() (library workspaces, converted activations, dequantised weight chunks,
  // argument tables): part of the footprint, so that a budget shares it out. 0 on the CPU, whose
  // scratch is per thread and small (the memory gate's fixed overhead).
  virtual uint64_t scratch_bytes(const ScratchPlan& /*plan*/) const { return 0; }
  virtual void to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void to_host(void* dst, const void* src, size_t bytes) = 0;
  // Queues a copy into host memory from alloc_host_pinned(); the bytes are there once
  // synchronize() returns. May be part of a recorded step. Default: to_host().
  virtual void to_host_async(void* dst, const void* src, size_t bytes);
  // Copies between two of this backend's allocations, after the ops queued before it (one KV
  // cache's rows into another's). Default: through host memory.
  virtual void copy(void* dst, const void* src, size_t bytes);
  virtual void synchronize() {}
  // True when backend memory is ordinary host memory (files can be read straight into it).
  virtual bool is_host() const { return false; }
  // The device queue the ops go to (a cudaStream_t), for a communicator to queue its collectives
  // behind them (parallel/nccl.h); null for host backends, whose ops are done when they return.
  virtual void* native_stream() { return nullptr; }

  // Host staging memory for streaming weights in: page-locked where that makes copies to the
  // device faster (CUDA), plain aligned host memory otherwise. free_host_pinned(nullptr) is a
  // no-op. Thread-safe, as are host_waits_for() and the host memory it guards.
  virtual void* alloc_host_pinned(size_t bytes);
  virtual void free_host_pinned(void* p);
  // Host-to-device copies beside compute (expert streaming). copy_after_compute() orders the
  // async copies queued after it behind every op queued so far (which may still read their
  // destinations). copy_to_device_async() queues a copy and returns a ticket: `src` must stay
  // unchanged until host_waits_for(ticket) returns, and ops queued after
  // compute_waits_for(ticket) see the bytes. Default: a synchronous to_device().
  virtual void copy_after_compute() {}
  virtual uint64_t copy_to_device_async(void* dst, const void* src, size_t bytes);
  virtual void compute_waits_for(uint64_t /*ticket*/) {}
  virtual void host_waits_for(uint64_t /*ticket*/) {}

  // Runs `ops`, a sequence of calls on this backend that is the same every time it runs under
  // `key`: same buffers, same shapes, no reads back to the host but to_host_async() ones; only
  // the contents of the host
  // arguments (ids, positions...) change. A backend may record the sequence once and replay it
  // (CUDA graphs: one launch instead of hundreds). A replay re-reads every host argument from
  // the address it had when recorded, and skips the host-side checks the ops make, so the caller
  // keeps its argument arrays in place and validates their values first. free() forgets every
  // recording (a recording names the buffers it touches). Default: runs `ops`.
  virtual void run_recorded(const StepKey& key, const std::function<void()>& ops);

  // Measures DeviceCeilings (about a second; allocates and frees a few GiB).
  virtual DeviceCeilings measure_ceilings() { return {}; }

  // Whether the matmul / embedding kernels take weights of type t (the engine refuses a model with
  // a matrix of another type at open, before allocating). Default: every weight type of the CPU
  // kernels (is_weight_dtype_supported).
  virtual bool has_weight_kernels(DType t) const;

  // Weights. `host` points at `rows * row_stride` bytes in the file's row layout. A device backend
  // copies them; a host backend (is_host()) uses them where they are, so they must outlive the
  // weight.
  virtual Weight upload_weight(DType dtype, int64_t rows, int64_t cols, size_t row_stride,
                               const void* host) = 0;
  virtual void release_weight(Weight& w) = 0;
  // Lets a backend rearrange an uploaded weight in place into a layout its kernels read faster, in
  // the same bytes (q8_0 and q4_k to q6_k: the CPU's AVX512-VNNI panels, WeightLayout::Panels;
  // q8_0: CUDA's 4-row groups, WeightLayout::Q8Groups; q6_k: CUDA's rows of bodies then d values,
  // WeightLayout::Q6Rows). Only for weights whose memory the caller owns (a host backend's buffer,
  // or a device upload) and reads no other way than through this backend's ops. Default: nothing.
  virtual void pack_weight(Weight& /*w*/) {}
  // A host backend's routed experts: pack_weight() on the calling thread (a reader thread packs an
  // expert right after its bytes land in a slot, resident and streamed alike, so both give the
  // same bits). Default: nothing (device backends pack resident experts with pack_weight()).
  virtual void pack_expert_weight(Weight& /*w*/) {}
  // Views of a packed weight (rows [a, b) at data + a * row_stride, same layout) are valid where a
  // and b are multiples of this; 1 for the row layout.
  virtual int64_t weight_row_group(DType /*dtype*/) const { return 1; }

  // out[m] = table[ids[m]] * scale. ids are host memory.
  virtual void embed(const Weight& table, const int32_t* ids, int64_t M, float scale,
                     float* out) = 0;
  // out[m] = x[m] / rms(x[m]) * (w or 1 + w), over `n` elements per row (in place allowed).
  virtual void rms_norm(const float* x, const float* w, int64_t M, int64_t n, float eps,
                        bool plus_one, float* out) = 0;
  // x += y, then out = rms_norm(x): the residual add and the norm after it, in one pass where the
  // backend can (the same bits as add() then rms_norm()). Default: those two ops.
  virtual void add_rms_norm(float* x, const float* y, const float* w, int64_t M, int64_t n,
                            float eps, bool plus_one, float* out);
  // In place over each head of each row: x is [M][n_heads * head_dim].
  virtual void rms_norm_heads(float* x, const float* w, int64_t M, int64_t n_heads,
                              int64_t head_dim, float eps, bool plus_one) = 0;
  // y[m][r] = dot(w row r, x[m]) for the `w.rows` rows; x is [M][w.cols], y is [M][w.rows].
  virtual void matmul(const Weight& w, const float* x, int64_t M, float* y) = 0;
  // Grouped matmul (the routed experts of a micro-batch): group g < G multiplies rows
  // [row0[g], row0[g] + rows[g]) of x ([*][shape.cols]) by the weight at weights[g] (a host array
  // of backend pointers, each of shape's dtype, dimensions and stride) into the same rows of y
  // ([*][shape.rows]). A row's result depends only on its own x row, its group's weight and
  // the group's row count (the kernel may change with it: one row, a few, a GEMM), never on the
  // other groups of the call. Default: one matmul() per non-empty group.
  virtual void matmul_grouped(const Weight& shape, const void* const* weights, const int64_t* row0,
                              const int64_t* rows, int64_t G, const float* x, float* y);
  virtual void add_bias(float* y, const float* b, int64_t M, int64_t n) = 0;
  virtual void add(float* y, const float* x, int64_t n) = 0;  // y += x
  virtual void zero(float* x, int64_t n);                     // x = 0 (default: a host copy)
  virtual void scale(float* x, int64_t n, float s);           // x *= s (default: through the host)
  // Rotates the first rotary_dim elements of each head; positions are host memory.
  virtual void rope(float* x, int64_t M, int64_t n_heads, const int32_t* pos,
                    const RopeArgs& r) = 0;
  // Decode of one token whose n_q query, n_k key and n_k value heads lie side by side in qkv (one
  // matmul over stacked weights): with q_w / k_w, the per-head RMS norm of the query heads (q_w)
  // and key heads (k_w); rope() over both; then the key and value heads into the cache row pos[0].
  // The same bits as rms_norm_heads() twice, rope() and kv_store() (the default), in one pass where
  // the backend can. kv.width is n_k * r.head_dim.
  virtual void rope_kv_store(float* qkv, const float* q_w, const float* k_w, int64_t n_q,
                             int64_t n_k, float eps, bool plus_one, const int32_t* pos,
                             const RopeArgs& r, const KvView& kv);
  // Writes k/v rows [M][width] into the cache at rows pos[m].
  virtual void kv_store(const KvView& kv, const float* k, const float* v, int64_t M,
                        const int32_t* pos) = 0;
  // Causal attention of q [M][n_head * head_dim] over cache rows 0..pos[m]; out like q.
  virtual void attention(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                         const AttentionArgs& a, float* out) = 0;
  // A decode step of M sequences: row m of k / v (of q) is the one new token of the sequence whose
  // layer cache is kv[m], at pos[m]. The same bits as kv_store() / attention() of each row alone
  // (the default); a device does all the rows in one launch. `kv` is host memory that a recorded
  // step re-reads (see run_recorded).
  virtual void kv_store_each(const KvView* kv, const float* k, const float* v, int64_t M,
                             const int32_t* pos);
  virtual void attention_each(const float* q, const KvView* kv, int64_t M, const int32_t* pos,
                              const AttentionArgs& a, float* out);
  // Gated activation: out[r][i] = act(gate[r * stride + i]) * up[r * stride + i] for r < rows,
  // i < n; out is [rows][n]. Separate gate and up buffers have stride = n; one matmul over the
  // stacked gate and up weights writes each row as [gate | up]: up = gate + n, stride = 2n.
  virtual void glu(Glu act, const float* gate, const float* up, int64_t rows, int64_t n,
                   int64_t stride, float* out) = 0;
  // glu() with the clamped SwiGLU. Default: refused, naming the backend (one without it refuses
  // such models at open).
  virtual void glu_clamped(const float* gate, const float* up, int64_t rows, int64_t n,
                           int64_t stride, const ClampedSwiGlu& p, float* out);
  // Gated DeltaNet, over the M rows of one sequence in order. conv_silu(): x [M][channels] in place
  // becomes silu of the causal depthwise convolution of its columns with taps [channels][kernel],
  // the `kernel - 1` inputs before row 0 taken from window ([kernel - 1][channels], oldest first),
  // which then holds the last kernel - 1 inputs.
  // Default (all three): refused, naming the backend (one without these kernels refuses hybrid
  // models at open).
  virtual void conv_silu(float* x, int64_t M, int64_t channels, const float* taps, int64_t kernel,
                         float* window);
  // The gated delta rule: qkv [M][2 * key_dim + value_dim] (the convolution's output: queries,
  // keys, values), beta and alpha logits [M][n_v_heads]; per row and value head h, with q, k
  // L2-normalised and q scaled by k_head_dim^-0.5, beta = sigmoid(b), g = a[h] * softplus(alpha +
  // dt_bias[h]): S *= exp(g); S += k (x) beta (v - S^T k); out = S^T q. out is [M][value_dim].
  virtual void delta_rule(const float* qkv, const float* beta, const float* alpha, int64_t M,
                          const DeltaRuleArgs& a, float* state, float* out);
  // Multi-head latent attention's per-head maps (Backend default for both: refused, naming the
  // backend). matmul_heads(): w holds n_heads equal blocks of rows, head h's block W_h; for each
  // row m < M and head h, y + m * y_stride + h * y_head (w.rows / n_heads values) = W_h times
  // x + m * x_stride + h * x_head (w.cols values).
  virtual void matmul_heads(const Weight& w, int64_t n_heads, const float* x, int64_t x_stride,
                            int64_t x_head, int64_t M, float* y, int64_t y_stride, int64_t y_head);
  // dst + r * dst_stride = src + r * src_stride, n floats, for r < rows.
  virtual void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                         int64_t rows, int64_t n);
  // y[m] += sigmoid(g[m]) * x[m] for M rows of n (g: one value a row): a gated shared expert.
  virtual void add_gated_rows(float* y, const float* x, const float* g, int64_t M, int64_t n);
  // y[idx[m]] += scale[m] * x[m] for m < M (rows of width n); idx/scale are host memory.
  virtual void scatter_add_rows(float* y, const float* x, const int32_t* idx, const float* scale,
                                int64_t M, int64_t n) = 0;
  // out[m] = x[idx[m]] (rows of width n); idx is host memory.
  virtual void gather_rows(const float* x, const int32_t* idx, int64_t M, int64_t n,
                           float* out) = 0;
  virtual void softcap(float* x, int64_t n, float cap) = 0;  // x = cap * tanh(x / cap)
  // nll[i] = nll_of_row(row i of logits, V, targets[i]) for n rows of V logits (backend memory);
  // targets and nll are host memory, every target in [0, V). A device computes them where the
  // logits are and sends back only the n values. Default: on the host, after copying the logits
  // there unless is_host().
  virtual void nll_rows(const float* logits, int64_t n, int64_t V, const int32_t* targets,
                        double* nll);

  // Routed experts. route(): ids and weights [M][k] (backend memory) of the k experts each row of
  // router logits [M][n_expert] picks, as route_token() does; a.bias is backend memory. Default:
  // on the host.
  virtual void route(const float* logits, int64_t M, const RouterArgs& a, int32_t* ids,
                     float* weights);
  // True when the two ops below run without reading the routing back to the host, so that a
  // decode step over resident experts can stay on the device (and be recorded).
  virtual bool indexes_experts_on_device() const { return false; }
  // y[i] = W_{ids[i]} x_i for i < n: `experts` (backend memory) holds one data pointer per expert,
  // each a weight of `shape`'s dtype and dimensions; x_i = x + (i / experts_per_x) * x_stride
  // (x_stride 0: one shared row; experts_per_x: how many consecutive experts share an input row,
  // e.g. each token's k over the rows of several tokens, n a multiple of it); y is
  // [n][shape.rows]. Default: the ids read back, one matmul per expert.
  virtual void matmul_indexed(const Weight& shape, const void* const* experts, const int32_t* ids,
                              int64_t n, const float* x, int64_t x_stride, int64_t experts_per_x,
                              float* y);
  // matmul_indexed() that also stores the bytes of every weight row it reads, for each expert
  // whose fill entry (fill[ids[i]], backend memory) is not null, at the same offset from that
  // address: a weight read from host memory fills its VRAM slot on the way. Default:
  // matmul_indexed(), then the copies.
  virtual void matmul_indexed_filling(const Weight& shape, const void* const* experts,
                                      void* const* fill, const int32_t* ids, int64_t n,
                                      const float* x, int64_t x_stride, int64_t experts_per_x,
                                      float* y);
  // True when the backend pages experts of this weight type on the device: page_experts() and
  // commit_experts() in its recorded steps, matmul_indexed_filling() as one pass.
  virtual bool pages_experts(DType /*type*/) const { return false; }
  // Before a layer's routed experts' matmuls (ids: k distinct experts, backend memory): the step
  // count advances; an expert with a slot marks it used; each other one takes the least recently
  // used slot this step does not use (its expert, if any, loses it and its table entries point
  // back at host memory), keeps its table entries at host memory for this step and gets fill
  // entries at the slot, so that its matmuls fill the slot. Counts hits and misses. Default: on
  // the host, the state read back and written again.
  virtual void page_experts(const ExpertPages& p, const int32_t* ids, int64_t k);
  // After those matmuls: each filled expert's table entries point at its slot, its fill entries
  // are cleared. Default: on the host.
  virtual void commit_experts(const ExpertPages& p, const int32_t* ids, int64_t k);
  // For each of M tokens m: out[m] = sum over i < k of weights[m][i] * y[m][i] (rows of n), the
  // experts taken in ascending id order (ids [M][k]): the order in which the host path scatters
  // them, so both give the same bits. Default: zero() and scatter_add_rows() per expert.
  virtual void combine_experts(const float* y, const int32_t* ids, const float* weights, int64_t M,
                               int64_t k, int64_t n, float* out);
  // x += combine_experts(y, ids, weights), then out = rms_norm(x): a routed FFN's output joins the
  // residual stream in the norm after it. `sum` ([M][n]) is where the default puts the combined
  // rows (combine_experts() then add_rms_norm(), the same bits); a backend that does both in one
  // pass may leave it unwritten.
  virtual void combine_add_rms_norm(const float* y, const int32_t* ids, const float* weights,
                                    int64_t k, float* x, const float* w, int64_t M, int64_t n,
                                    float eps, bool plus_one, float* sum, float* out);
};

// The CPU backend with `threads` workers (0 = physical cores).
std::unique_ptr<Backend> make_cpu_backend(int threads);

// -log softmax(row)[target] over V logits, in double so that the ~10^5 terms of a perplexity keep
// their digits.
double nll_of_row(const float* row, int64_t V, int32_t target);

// matmul_indexed's grouping of n experts into runs of experts_per_x sharing an input row: fails
// (ErrorKind::Unsupported) unless experts_per_x >= 1 divides n.
void check_experts_per_x(int64_t n, int64_t experts_per_x);

}  // namespace ts
