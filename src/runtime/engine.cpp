#include "runtime/engine.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "core/file_io.h"
#include "quant/dequant.h"
#include "runtime/rope_freqs.h"

namespace ts {

namespace {

// A matrix of a type the backend has no kernels for refuses the model before anything sizeable
// is allocated (else the load would fail part way, or a streamed expert at its first use).
void check_weight_types(const ModelSpec& spec, const Backend& backend) {
  const auto check = [&](const std::string& name, DType t) {
    if (!backend.has_weight_kernels(t))
      fail(ErrorKind::Unsupported, "tensor '" + name + "' has type " + dtype_name(t) +
                                       ", which the " + backend.name() +
                                       " backend has no kernels for" +
                                       (backend.is_host() ? "" : " (--backend cpu runs it)"));
  };
  for (const TensorRef* t : {&spec.token_embd, &spec.output}) check(t->name, t->dtype);
  for (const LayerIndex& layer : spec.layers) {
    for (const auto& t : layer.tensors)
      if (t && t->dims.size() == 2) check(t->name, t->dtype);
    for (const auto& expert : layer.experts)
      for (const ExpertSlice& slice : expert)
        check("expert weights of layer " + std::to_string(&layer - spec.layers.data()),
              slice.dtype);
  }
}

// Families whose kernels have each run on a GPU, but not yet together: refused on a device until
// a device run of their `cuda` tests passes. That run asks for them with
// TURBOSPARK_UNVERIFIED_GPU_OPS=1.
constexpr Family kUnverifiedOnGpu[] = {Family::Qwen3VLMoe};

void check_verified_on_gpu(const ArchConfig& c, const Backend& backend, const std::string& path) {
  const char* asked = std::getenv("TURBOSPARK_UNVERIFIED_GPU_OPS");
  if (backend.is_host() || (asked != nullptr && std::string(asked) == "1")) return;
  for (const Family f : kUnverifiedOnGpu)
    if (c.family == f)
      fail(ErrorKind::Unsupported, path + ": family " + family_name(f) +
                                       " is not yet verified on a GPU (--backend cpu runs it)");
}

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& name, int device, int threads) {
  if (name == "cpu") return make_cpu_backend(threads);
  if (name == "cuda") return make_cuda_backend(device);
  // Without the driver's control node there is no device to ask the CUDA runtime about.
  if (name == "auto")
    return ::access("/dev/nvidiactl", F_OK) == 0 && cuda_device_available()
               ? make_cuda_backend(device)
               : make_cpu_backend(threads);
  fail(ErrorKind::Usage, "unknown backend '" + name + "' (auto, cpu, cuda)");
}

std::unique_ptr<Engine> Engine::open(const std::string& path, const EngineOptions& options) {
  // The backend first (it allocates nothing sizeable): the default micro-batch depends on it, and
  // the footprint on the micro-batch.
  return open(path, options, make_backend(options.backend, options.device, options.threads));
}

std::unique_ptr<Engine> Engine::open(const std::string& path, const EngineOptions& options,
                                     std::unique_ptr<Backend> backend) {
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  e->spec_ = open_model_spec(path);
  const ArchConfig& c = e->spec_->cfg;
  if (options.ctx <= 0) fail(ErrorKind::Usage, "context length must be positive");
  if (options.state_checkpoints < 0 || options.state_checkpoints > 64)
    fail(ErrorKind::Usage, "state checkpoints " + std::to_string(options.state_checkpoints) +
                               " is out of range [0, 64]");
  if (options.prefill_batch < 0 || options.prefill_batch > 4096)
    fail(ErrorKind::Usage,
         "--prefill-batch " + std::to_string(options.prefill_batch) + " is out of range [1, 4096]");
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (options.kv_type == DType::Q8_0 && c.head_dim_of(l) % 32 != 0 &&
        !c.has_mixer(MixerKind::Mla))
      fail(ErrorKind::Usage, "--kv-type q8_0 needs head_dim to be a multiple of 32 (it is " +
                                 std::to_string(c.head_dim_of(l)) + ")");
  if (options.kv_type == DType::Q8_0 && c.has_mixer(MixerKind::Mla) && c.mla.row_width() % 32 != 0)
    fail(ErrorKind::Usage,
         "--kv-type q8_0 needs kv_lora_rank + qk_rope_head_dim to be a multiple of 32 (it is " +
             std::to_string(c.mla.row_width()) + ")");
  e->backend_ = std::move(backend);
  check_weight_types(*e->spec_, *e->backend_);
  check_verified_on_gpu(c, *e->backend_, path);
  // On the CPU the page cache already keeps recently read experts in RAM.
  if (options.ram_budget > 0 && e->backend_->is_host())
    fail(ErrorKind::Usage,
         "--ram-budget applies to device backends only (on the CPU the page cache is that tier)");
  if (options.prefill_batch == 0)
    e->options_.prefill_batch = default_prefill_batch(c, e->backend_->is_host(), options.ctx);
  FootprintRequest req{.ctx = options.ctx,
                       .kv_type = options.kv_type,
                       .expert_slots = options.expert_slots,
                       .prefill_batch = e->options_.prefill_batch,
                       .ram_budget = options.ram_budget,
                       .state_checkpoints = options.state_checkpoints,
                       .backend = e->backend_.get()};
  if (options.memory_budget > 0) {
    if (options.expert_slots > 0)
      fail(ErrorKind::Usage, "give --expert-slots or --memory-budget, not both");
    req.expert_slots = slots_for_budget(*e->spec_, req, options.memory_budget);
    e->options_.expert_slots = req.expert_slots;
  }
  if (c.is_moe() && req.expert_slots > 0 && req.expert_slots < c.n_expert_used)
    fail(ErrorKind::Budget, "--expert-slots " + std::to_string(req.expert_slots) +
                                " is below top-k (" + std::to_string(c.n_expert_used) +
                                " experts per token)");
  e->footprint_ = compute_footprint(*e->spec_, req);
  e->load_weights();
  e->experts_ = std::make_unique<ExpertStore>(
      *e->spec_, *e->backend_,
      ExpertStore::Options{req.expert_slots, options.cache_policy, options.expert_prefetch,
                           e->footprint_.ram_tier_entries, options.expert_io});
  return e;
}

Engine::~Engine() {
  experts_.reset();
  if (!backend_) return;
  for (Weight& w : uploaded_) backend_->release_weight(w);
  for (void* p : owned_) backend_->free(p);
}

Weight Engine::load_matrix(const TensorRef& t) {
  return upload_rows({&t});
}

namespace {

float neg_exp(float x) {
  return -std::exp(x);
}

// Rows [first, first + count) of a stored matrix, as a tensor of its own.
TensorRef row_run(const TensorRef& t, int64_t first, int64_t count) {
  const uint64_t stride = t.nbytes / static_cast<uint64_t>(t.rows());
  TensorRef r = t;
  r.dims = {t.dims[0], static_cast<uint64_t>(count)};
  r.offset = t.offset + stride * static_cast<uint64_t>(first);
  r.nbytes = stride * static_cast<uint64_t>(count);
  return r;
}

// Of a matrix whose rows come in `groups` equal groups, rows [lo, hi) of every group, in order:
// one list of runs (how the fused projections of Qwen3-Next's checkpoints are taken apart).
std::vector<TensorRef> rows_of_groups(const TensorRef& t, int64_t groups, int64_t lo, int64_t hi) {
  std::vector<TensorRef> runs;
  const int64_t size = t.rows() / groups;
  for (int64_t g = 0; g < groups; ++g) runs.push_back(row_run(t, g * size + lo, hi - lo));
  return runs;
}

}  // namespace

Weight Engine::load_stacked(const std::vector<const TensorRef*>& parts,
                            const std::vector<Weight*>& views) {
  std::vector<std::vector<TensorRef>> segments;
  for (const TensorRef* t : parts) {
    if (t == nullptr) return Weight{};
    segments.push_back({*t});
  }
  return load_segments(segments, views);
}

Weight Engine::load_segments(const std::vector<std::vector<TensorRef>>& segments,
                             const std::vector<Weight*>& views) {
  const TensorRef& first = segments[0][0];
  const uint64_t stride = first.nbytes / static_cast<uint64_t>(first.rows());
  // A backend that packs rows in groups can take views at group boundaries only.
  const int64_t group = backend_->weight_row_group(first.dtype);
  std::vector<const TensorRef*> runs;
  std::vector<int64_t> seg_rows;
  for (const auto& segment : segments) {
    int64_t rows = 0;
    for (const TensorRef& t : segment) {
      if (t.dtype != first.dtype || t.cols() != first.cols() ||
          t.nbytes / static_cast<uint64_t>(t.rows()) != stride ||
          t.nbytes % static_cast<uint64_t>(t.rows()) != 0)
        return Weight{};
      runs.push_back(&t);
      rows += t.rows();
    }
    // Views must start at whole row groups; a single segment is its weight's only view.
    if (segments.size() > 1 && rows % group != 0) return Weight{};
    seg_rows.push_back(rows);
  }
  const Weight w = upload_rows(runs);
  uint64_t off = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    *views[i] = Weight{
        w.dtype, seg_rows[i], w.cols, w.row_stride, static_cast<const uint8_t*>(w.data) + off,
        w.layout};
    off += stride * static_cast<uint64_t>(seg_rows[i]);
  }
  return w;
}

Weight Engine::upload_rows(const std::vector<const TensorRef*>& parts) {
  // Read into memory we own (not the mmap) so that the resident set is exactly what the
  // footprint announces and a file truncated later cannot fault a resident weight.
  const TensorRef& first = *parts[0];
  uint64_t total = 0;
  int64_t rows = 0;
  for (const TensorRef* t : parts) {
    total += t->nbytes;
    rows += t->rows();
  }
  void* buf = weight_buffer(total, first.name);
  uint64_t off = 0;
  for (const TensorRef* t : parts) {
    read_exact(t->file->fd(), static_cast<uint8_t*>(buf) + off, t->nbytes, t->offset,
               t->file->path() + ": tensor '" + t->name + "'", ErrorKind::Model);
    off += t->nbytes;
  }
  return place_weight(first.dtype, rows, first.cols(),
                      static_cast<size_t>(first.nbytes / static_cast<uint64_t>(first.rows())), buf);
}

void* Engine::weight_buffer(uint64_t bytes, const std::string& what) {
  void* buf = backend_->is_host() ? backend_->alloc(bytes) : std::malloc(bytes);
  if (buf == nullptr) fail(ErrorKind::Runtime, "out of memory reading " + what);
  return buf;
}

Weight Engine::place_weight(DType dtype, int64_t rows, int64_t cols, size_t row_stride, void* buf) {
  Weight w = backend_->upload_weight(dtype, rows, cols, row_stride, buf);
  // The memory is ours (host: the buffer; device: the upload) and only the backend's ops read it.
  backend_->pack_weight(w);
  if (backend_->is_host()) {
    owned_.push_back(buf);
  } else {
    std::free(buf);
    uploaded_.push_back(w);
  }
  return w;
}

std::vector<float> Engine::read_floats(const TensorRef& t) {
  std::vector<uint8_t> raw(t.nbytes);
  read_exact(t.file->fd(), raw.data(), t.nbytes, t.offset,
             t.file->path() + ": tensor '" + t.name + "'", ErrorKind::Model);
  int64_t n = 1;
  for (uint64_t d : t.dims) n *= static_cast<int64_t>(d);
  std::vector<float> f(static_cast<size_t>(n));
  dequantize_row(t.dtype, raw.data(), f.data(), n);
  return f;
}

const float* Engine::upload_floats(const std::vector<float>& f) {
  auto* dev = static_cast<float*>(backend_->alloc(f.size() * sizeof(float)));
  backend_->to_device(dev, f.data(), f.size() * sizeof(float));
  owned_.push_back(dev);
  return dev;
}

const float* Engine::load_vector(const TensorRef* t, float (*map)(float)) {
  if (t == nullptr) return nullptr;
  std::vector<float> f = read_floats(*t);
  if (map != nullptr)
    for (float& x : f) x = map(x);
  return upload_floats(f);
}

void Engine::load_expert_biases(const LayerIndex& I, MoeLayerWeights& W) {
  const TensorRef* gate = I.get(LayerTensor::ExpGateBias);
  if (gate == nullptr) return;
  const int64_t E = cfg().n_expert, ff = cfg().n_ff_expert;
  const std::vector<float> g = read_floats(*gate);
  std::vector<float> gate_up(static_cast<size_t>(E * 2 * ff));
  if (const TensorRef* up = I.get(LayerTensor::ExpUpBias)) {
    const std::vector<float> u = read_floats(*up);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t i = 0; i < ff; ++i) {
        gate_up[static_cast<size_t>(e * 2 * ff + i)] = g[static_cast<size_t>(e * ff + i)];
        gate_up[static_cast<size_t>(e * 2 * ff + ff + i)] = u[static_cast<size_t>(e * ff + i)];
      }
  } else {
    // One tensor, gate and up interleaved (even = gate), as gpt-oss's checkpoints store them.
    for (int64_t e = 0; e < E; ++e)
      for (int64_t i = 0; i < ff; ++i) {
        gate_up[static_cast<size_t>(e * 2 * ff + i)] = g[static_cast<size_t>(e * 2 * ff + 2 * i)];
        gate_up[static_cast<size_t>(e * 2 * ff + ff + i)] =
            g[static_cast<size_t>(e * 2 * ff + 2 * i + 1)];
      }
  }
  W.gate_up_bias = upload_floats(gate_up);
  W.down_bias = load_vector(I.get(LayerTensor::ExpDownBias));
}

std::vector<float> Engine::rope_freqs_divisors() {
  std::vector<float> freqs;
  if (spec_->rope_freqs) {
    const TensorRef& t = *spec_->rope_freqs;
    std::vector<uint8_t> raw(t.nbytes);
    read_exact(t.file->fd(), raw.data(), t.nbytes, t.offset,
               t.file->path() + ": tensor '" + t.name + "'", ErrorKind::Model);
    freqs.resize(static_cast<size_t>(t.dims[0]));
    dequantize_row(t.dtype, raw.data(), freqs.data(), static_cast<int64_t>(freqs.size()));
  }
  return freqs;
}

const float* Engine::upload_inv_freq(bool sliding) {
  return upload_floats(rope_inv_freq(cfg(), sliding, rope_freqs_divisors()));
}

void Engine::load_per_layer_embd() {
  if (!spec_->per_layer_embd) return;
  const TensorRef& t = *spec_->per_layer_embd;
  const size_t stride = static_cast<size_t>(t.nbytes / static_cast<uint64_t>(t.rows()));
  // Read a row a token and layer group: a host backend reads it where the file is mapped, so the
  // table (GBs at real size) stays out of the resident set (ModelSpec::mapped_bytes); a device
  // backend copies it.
  if (backend_->is_host()) {
    per_layer_embd_ =
        backend_->upload_weight(t.dtype, t.rows(), t.cols(), stride, t.file->data() + t.offset);
  } else {
    per_layer_embd_ = load_matrix(t);
  }
  per_layer_model_proj_ = load_matrix(*spec_->per_layer_model_proj);
  per_layer_proj_norm_ = load_vector(&*spec_->per_layer_proj_norm);
}

void Engine::load_gemma4_layer(int64_t l, const LayerIndex& I, LayerWeights& L) {
  const ArchConfig& c = cfg();
  const int64_t hd = c.head_dim_of(l);
  if (c.attn_v_norm) L.v_norm = upload_floats(std::vector<float>(static_cast<size_t>(hd), 1.0f));
  if (const TensorRef* g = I.get(LayerTensor::PleGate)) {
    L.ple_gate = load_matrix(*g);
    L.ple_proj = load_matrix(*I.get(LayerTensor::PleProj));
    L.ple_norm = load_vector(I.get(LayerTensor::PleNorm));
  }
  if (const TensorRef* s = I.get(LayerTensor::OutScale)) L.out_scale = read_floats(*s)[0];
  if (L.moe && c.moe_dense_beside) {
    L.ffn_post_norm_1 = load_vector(I.get(LayerTensor::FfnPostNorm1));
    L.ffn_pre_norm_2 = load_vector(I.get(LayerTensor::FfnPreNorm2));
    L.ffn_post_norm_2 = load_vector(I.get(LayerTensor::FfnPostNorm2));
    // The router reads rms_norm(x) * scale * n_embd^-1/2: one norm weight.
    std::vector<float> w = read_floats(*I.get(LayerTensor::RouterScale));
    const float root = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
    for (float& x : w) x *= root;
    L.router_norm = upload_floats(w);
    L.routed.expert_scale = load_vector(I.get(LayerTensor::ExpScale));
    L.routed.expert_scale_host = read_floats(*I.get(LayerTensor::ExpScale));
  }
  // Each layer its own rotation: its head_dim and, global, its proportional frequencies.
  L.rope = RopeArgs{hd, hd, true, upload_floats(rope_inv_freq_layer(c, l, rope_freqs_divisors()))};
  L.attn.n_head_kv = c.n_head_kv_of(l);
  L.attn.head_dim = hd;
}

void Engine::load_attention(const LayerIndex& I, LayerWeights& L) {
  const ArchConfig& c = cfg();
  auto mat = [&](LayerTensor t) { return I.get(t) ? load_matrix(*I.get(t)) : Weight{}; };
  const TensorRef& wq = *I.get(LayerTensor::Wq);
  // A layer reading another's KV rows has only its q projection; a k = v layer no v (Gemma 4).
  if (I.get(LayerTensor::Wk) == nullptr || I.get(LayerTensor::Wv) == nullptr) {
    L.wq = mat(LayerTensor::Wq);
    L.wk = mat(LayerTensor::Wk);
    L.wo = mat(LayerTensor::Wo);
    L.q_norm = load_vector(I.get(LayerTensor::QNorm));
    L.k_norm = load_vector(I.get(LayerTensor::KNorm));
    return;
  }
  // With an output gate the q projection holds, per head, head_dim query rows then head_dim gate
  // rows: taken apart into [q heads] and [gate heads].
  const int64_t hd = c.head_dim;
  const std::vector<TensorRef> q =
      c.attn_output_gate ? rows_of_groups(wq, c.n_head, 0, hd) : std::vector<TensorRef>{wq};
  std::vector<std::vector<TensorRef>> parts = {
      q, {*I.get(LayerTensor::Wk)}, {*I.get(LayerTensor::Wv)}};
  std::vector<Weight*> views = {&L.wq, &L.wk, &L.wv};
  if (c.attn_output_gate) {
    parts.push_back(rows_of_groups(wq, c.n_head, hd, 2 * hd));
    views.push_back(&L.wgate);
  }
  L.wqkv = load_segments(parts, views);
  if (L.wqkv.data == nullptr) {
    load_segments({q}, {&L.wq});
    if (c.attn_output_gate) load_segments({parts[3]}, {&L.wgate});
    L.wk = mat(LayerTensor::Wk);
    L.wv = mat(LayerTensor::Wv);
  }
  L.wo = mat(LayerTensor::Wo);
  L.bq = load_vector(I.get(LayerTensor::Bq));
  L.bk = load_vector(I.get(LayerTensor::Bk));
  L.bv = load_vector(I.get(LayerTensor::Bv));
  L.bo = load_vector(I.get(LayerTensor::Bo));
  L.q_norm = load_vector(I.get(LayerTensor::QNorm));
  L.k_norm = load_vector(I.get(LayerTensor::KNorm));
}

void Engine::load_delta_net(const LayerIndex& I, LayerWeights& L) {
  const ArchConfig& c = cfg();
  const DeltaNetConfig& d = c.delta;
  DeltaNetWeights& D = L.delta;
  const TensorRef& qkv = *I.get(LayerTensor::DnQkv);
  const TensorRef& beta = *I.get(LayerTensor::DnBeta);
  if (I.get(LayerTensor::DnZ) != nullptr) {
    D.qkv = load_matrix(qkv);
    D.z = load_matrix(*I.get(LayerTensor::DnZ));
  } else {
    // Qwen3-Next's in_proj_qkvz: per key head, [q (dk) | k (dk) | v (r dv) | z (r dv)] rows, r the
    // value heads a key head serves; regrouped into [q heads | k heads | v heads] and [z heads].
    const int64_t nk = d.n_k_heads, dk = d.k_head_dim, rv = d.value_dim() / nk;
    std::vector<TensorRef> qkv_runs = rows_of_groups(qkv, nk, 0, dk);
    for (const TensorRef& t : rows_of_groups(qkv, nk, dk, 2 * dk)) qkv_runs.push_back(t);
    for (const TensorRef& t : rows_of_groups(qkv, nk, 2 * dk, 2 * dk + rv)) qkv_runs.push_back(t);
    D.qkv = load_segments({qkv_runs}, {&D.qkv});
    D.z = load_segments({rows_of_groups(qkv, nk, 2 * dk + rv, 2 * dk + 2 * rv)}, {&D.z});
  }
  if (I.get(LayerTensor::DnAlpha) != nullptr) {
    D.beta = load_matrix(beta);
    D.alpha = load_matrix(*I.get(LayerTensor::DnAlpha));
  } else {
    // Qwen3-Next's in_proj_ba: per key head, [beta (r) | alpha (r)] rows.
    const int64_t nk = d.n_k_heads, r = d.n_v_heads / nk;
    D.beta = load_segments({rows_of_groups(beta, nk, 0, r)}, {&D.beta});
    D.alpha = load_segments({rows_of_groups(beta, nk, r, 2 * r)}, {&D.alpha});
  }
  D.out = load_matrix(*I.get(LayerTensor::DnOut));
  D.conv = load_vector(I.get(LayerTensor::DnConv));
  // GGUF stores A as -exp(A_log) already; HF checkpoints store A_log.
  D.a = load_vector(I.get(LayerTensor::DnA), c.source == SourceKind::HfDir ? neg_exp : nullptr);
  D.dt_bias = load_vector(I.get(LayerTensor::DnDtBias));
  D.norm = load_vector(I.get(LayerTensor::DnNorm));
}

Weight Engine::load_transposed_heads(const TensorRef& t, int64_t heads, int64_t first,
                                     int64_t rows) {
  const uint64_t elem = t.dtype == DType::F32                             ? 4
                        : t.dtype == DType::F16 || t.dtype == DType::BF16 ? 2
                                                                          : 0;
  if (elem == 0)
    fail(ErrorKind::Unsupported, spec_->source->path() + ": tensor '" + t.name + "' has type " +
                                     dtype_name(t.dtype) + " (kv_b_proj must be f32, f16 or bf16)");
  const int64_t cols = t.cols(), per_head = t.rows() / heads;
  std::vector<uint8_t> src(t.nbytes);
  read_exact(t.file->fd(), src.data(), t.nbytes, t.offset,
             t.file->path() + ": tensor '" + t.name + "'", ErrorKind::Model);
  const uint64_t bytes = static_cast<uint64_t>(heads * cols * rows) * elem;
  auto* dst = static_cast<uint8_t*>(weight_buffer(bytes, t.name));
  // Head h's element (r, c) of its rows [first, first + rows) goes to (c, r) of its block.
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(
            dst + static_cast<uint64_t>((h * cols + c) * rows + r) * elem,
            src.data() + static_cast<uint64_t>((h * per_head + first + r) * cols + c) * elem, elem);
  return place_weight(t.dtype, heads * cols, rows, static_cast<size_t>(rows) * elem, dst);
}

void Engine::load_mla(const LayerIndex& I, LayerWeights& L) {
  const ArchConfig& c = cfg();
  const MlaConfig& m = c.mla;
  const int64_t H = c.n_head, nope = m.qk_nope_head_dim, rope = m.qk_rope_head_dim;
  MlaWeights& W = L.mla;
  if (const TensorRef* qa = I.get(LayerTensor::MlaQa)) {
    W.q_a = load_matrix(*qa);
    W.q_a_norm = load_vector(I.get(LayerTensor::MlaQaNorm));
  }
  // Per head, qk_nope rows then qk_rope rows: taken apart into [nope heads] and [rope heads].
  const TensorRef& q = W.q_a.data != nullptr ? *I.get(LayerTensor::MlaQb) : *I.get(LayerTensor::Wq);
  W.q_nope = load_segments({rows_of_groups(q, H, 0, nope)}, {&W.q_nope});
  W.q_pe = load_segments({rows_of_groups(q, H, nope, nope + rope)}, {&W.q_pe});
  // The cache row puts the rope key first (rope() rotates a head's first dims).
  const TensorRef& kva = *I.get(LayerTensor::MlaKvA);
  W.kv_a = load_segments({{row_run(kva, m.kv_lora_rank, rope), row_run(kva, 0, m.kv_lora_rank)}},
                         {&W.kv_a});
  W.kv_norm = load_vector(I.get(LayerTensor::MlaKvNorm));
  const TensorRef& kb = *I.get(LayerTensor::MlaKb);
  if (c.source == SourceKind::Gguf) {
    W.k_b = load_matrix(kb);
    W.v_b = load_matrix(*I.get(LayerTensor::MlaVb));
  } else {
    // HF's kv_b_proj: per head, qk_nope key rows then v_head_dim value rows, over the latent.
    W.k_b = load_transposed_heads(kb, H, 0, nope);
    W.v_b = load_segments({rows_of_groups(kb, H, nope, nope + m.v_head_dim)}, {&W.v_b});
  }
  const auto on_groups = [&](const Weight& w) {
    return w.data != nullptr && (w.rows / H) % backend_->weight_row_group(w.dtype) == 0;
  };
  if (W.q_nope.data == nullptr || W.q_pe.data == nullptr || W.kv_a.data == nullptr ||
      !on_groups(W.k_b) || !on_groups(W.v_b))
    fail(ErrorKind::Unsupported, spec_->source->path() +
                                     ": an MLA projection's heads do not fall on the backend's "
                                     "row groups");
  L.wo = load_matrix(*I.get(LayerTensor::Wo));
}

void Engine::load_shared_expert(const LayerIndex& I, LayerWeights& L) {
  SharedExpertWeights& S = L.routed.shared;
  auto mat = [&](LayerTensor t) { return I.get(t) ? load_matrix(*I.get(t)) : Weight{}; };
  if (I.get(LayerTensor::ShexpGate) == nullptr) return;
  S.gate_up =
      load_stacked({I.get(LayerTensor::ShexpGate), I.get(LayerTensor::ShexpUp)}, {&S.gate, &S.up});
  if (S.gate_up.data == nullptr) {
    S.gate = mat(LayerTensor::ShexpGate);
    S.up = mat(LayerTensor::ShexpUp);
  }
  S.down = mat(LayerTensor::ShexpDown);
  S.gate_inp = mat(LayerTensor::ShexpGateInp);
}

void Engine::load_weights() {
  const ArchConfig& c = cfg();
  token_embd_ = load_matrix(spec_->token_embd);
  output_ = c.tied_embeddings ? token_embd_ : load_matrix(spec_->output);
  output_norm_ = load_vector(&spec_->output_norm);
  // Layers of different head dims (Gemma 4) take their frequencies per layer (load_gemma4_layer).
  const bool per_layer_rope = !c.layer_head_dim.empty();
  const float* inv_freq_global = per_layer_rope ? nullptr : upload_inv_freq(false);
  const float* inv_freq_local = nullptr;
  mrope_streams_ = mrope_pair_streams(c);
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerIndex& I = spec_->layers[static_cast<size_t>(l)];
    LayerWeights& L = layers_[static_cast<size_t>(l)];
    auto mat = [&](LayerTensor t) { return I.get(t) ? load_matrix(*I.get(t)) : Weight{}; };
    L.attn_norm = load_vector(I.get(LayerTensor::AttnNorm));
    L.mixer = c.layer_mixer[static_cast<size_t>(l)];
    if (L.mixer == MixerKind::DeltaNet) {
      load_delta_net(I, L);
    } else if (L.mixer == MixerKind::Mla) {
      load_mla(I, L);
    } else {
      load_attention(I, L);
    }
    L.attn_post_norm = load_vector(I.get(LayerTensor::AttnPostNorm));
    L.ffn_norm = load_vector(I.get(LayerTensor::FfnNorm));
    L.ffn_post_norm = load_vector(I.get(LayerTensor::FfnPostNorm));
    if (I.get(LayerTensor::FfnGate) != nullptr)
      L.ffn_gate_up = load_stacked({I.get(LayerTensor::FfnGate), I.get(LayerTensor::FfnUp)},
                                   {&L.ffn_gate, &L.ffn_up});
    if (L.ffn_gate_up.data == nullptr) {
      L.ffn_gate = mat(LayerTensor::FfnGate);
      L.ffn_up = mat(LayerTensor::FfnUp);
    }
    L.ffn_down = mat(LayerTensor::FfnDown);
    L.moe = c.layer_moe[static_cast<size_t>(l)] != 0;
    if (L.moe) {
      L.routed.router = mat(LayerTensor::Router);
      L.routed.router_logit_bias = load_vector(I.get(LayerTensor::RouterLogitBias));
      load_expert_biases(I, L.routed);
      if (const TensorRef* b = I.get(LayerTensor::RouterBias)) {
        L.routed.router_bias = load_vector(b);
        L.routed.router_bias_host.resize(static_cast<size_t>(c.n_expert));
        backend_->to_host(L.routed.router_bias_host.data(), L.routed.router_bias,
                          L.routed.router_bias_host.size() * sizeof(float));
      }
      load_shared_expert(I, L);
    }
    const bool sliding = c.layer_sliding[static_cast<size_t>(l)] != 0;
    if (sliding && inv_freq_local == nullptr && !per_layer_rope)
      inv_freq_local = upload_inv_freq(true);
    L.rope = RopeArgs{c.head_dim, c.rotary_dim, c.rope_pairing == RopePairing::NeoX,
                      sliding ? inv_freq_local : inv_freq_global,
                      mrope_streams_.empty() ? nullptr : mrope_streams_.data()};
    // YaRN multiplies q and k by its attention factor after rotation: the scores by its square.
    const float scale =
        c.attn_scale * c.rope_attn_factor * c.rope_attn_factor * c.yarn_score_factor;
    L.attn = AttentionArgs{c.n_head,
                           c.n_head_kv,
                           c.head_dim,
                           scale,
                           c.attn_softcap,
                           sliding ? c.sliding_window : 0,
                           load_vector(I.get(LayerTensor::AttnSinks))};
    // MLA attends in the absorbed form: every head's query and the one key row of a token are
    // [rope part | latent] wide, its rope part rotated.
    if (L.mixer == MixerKind::Mla) L.rope.head_dim = L.attn.head_dim = c.mla.row_width();
    if (c.family == Family::Gemma4) load_gemma4_layer(l, I, L);
  }
  load_per_layer_embd();
}

}  // namespace ts
