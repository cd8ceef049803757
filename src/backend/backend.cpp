#include "backend/backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/expert_paging.h"
#include "core/checked.h"
#include "core/error.h"

namespace ts {
namespace {

constexpr size_t kHostAlign = 64;

}  // namespace

void* Backend::alloc_host_pinned(size_t bytes) {
  const size_t rounded =
      checked_add(bytes, kHostAlign - 1, "host staging allocation") / kHostAlign * kHostAlign;
  void* p = std::aligned_alloc(kHostAlign, rounded == 0 ? kHostAlign : rounded);
  if (p == nullptr)
    fail(ErrorKind::Runtime,
         "out of memory allocating " + std::to_string(bytes) + " bytes of host staging memory");
  return p;
}

void Backend::free_host_pinned(void* p) {
  std::free(p);
}

uint64_t Backend::copy_to_device_async(void* dst, const void* src, size_t bytes) {
  to_device(dst, src, bytes);
  return 0;
}

bool Backend::has_weight_kernels(DType t) const {
  return is_weight_dtype_supported(t);
}

void Backend::to_host_async(void* dst, const void* src, size_t bytes) {
  to_host(dst, src, bytes);
}

void Backend::copy(void* dst, const void* src, size_t bytes) {
  std::vector<uint8_t> staged(bytes);
  to_host(staged.data(), src, bytes);
  to_device(dst, staged.data(), bytes);
}

void Backend::kv_store_each(const KvView* kv, const float* k, const float* v, int64_t M,
                            const int32_t* pos) {
  for (int64_t m = 0; m < M; ++m)
    kv_store(kv[m], k + m * kv[m].width, v + m * kv[m].width, 1, pos + m);
}

void Backend::attention_each(const float* q, const KvView* kv, int64_t M, const int32_t* pos,
                             const AttentionArgs& a, float* out) {
  const int64_t row = a.n_head * a.head_dim;
  for (int64_t m = 0; m < M; ++m) attention(q + m * row, kv[m], 1, pos + m, a, out + m * row);
}

void Backend::run_recorded(const StepKey& /*key*/, const std::function<void()>& ops) {
  ops();
}

double nll_of_row(const float* row, int64_t V, int32_t target) {
  double mx = row[0];
  for (int64_t i = 1; i < V; ++i) mx = std::max<double>(mx, row[i]);
  double z = 0;
  for (int64_t i = 0; i < V; ++i) z += std::exp(static_cast<double>(row[i]) - mx);
  return std::log(z) + mx - row[target];
}

void check_experts_per_x(int64_t n, int64_t experts_per_x) {
  if (experts_per_x < 1 || n % experts_per_x != 0)
    fail(ErrorKind::Unsupported, "matmul_indexed: " + std::to_string(n) + " experts in runs of " +
                                     std::to_string(experts_per_x) + " sharing an input row");
}

void Backend::nll_rows(const float* logits, int64_t n, int64_t V, const int32_t* targets,
                       double* nll) {
  std::vector<float> host;
  if (!is_host()) {
    host.resize(static_cast<size_t>(n * V));
    to_host(host.data(), logits, host.size() * sizeof(float));
    logits = host.data();
  }
  for (int64_t r = 0; r < n; ++r) nll[r] = nll_of_row(logits + r * V, V, targets[r]);
}

void Backend::add_rms_norm(float* x, const float* y, const float* w, int64_t M, int64_t n,
                           float eps, bool plus_one, float* out) {
  add(x, y, M * n);
  rms_norm(x, w, M, n, eps, plus_one, out);
}

void Backend::rope_kv_store(float* qkv, const float* q_w, const float* k_w, int64_t n_q,
                            int64_t n_k, float eps, bool plus_one, const int32_t* pos,
                            const RopeArgs& r, const KvView& kv) {
  float* k = qkv + n_q * r.head_dim;
  if (q_w != nullptr) {
    rms_norm_heads(qkv, q_w, 1, n_q, r.head_dim, eps, plus_one);
    rms_norm_heads(k, k_w, 1, n_k, r.head_dim, eps, plus_one);
  }
  rope(qkv, 1, n_q + n_k, pos, r);
  kv_store(kv, k, k + n_k * r.head_dim, 1, pos);
}

void Backend::glu_clamped(const float*, const float*, int64_t, int64_t, int64_t,
                          const ClampedSwiGlu&, float*) {
  fail(ErrorKind::Unsupported, name() + " has no clamped SwiGLU kernel (glu_clamped)");
}

void Backend::conv_silu(float*, int64_t, int64_t, const float*, int64_t, float*) {
  fail(ErrorKind::Unsupported, name() + " has no Gated DeltaNet kernels (conv_silu)");
}

void Backend::delta_rule(const float*, const float*, const float*, int64_t, const DeltaRuleArgs&,
                         float*, float*) {
  fail(ErrorKind::Unsupported, name() + " has no Gated DeltaNet kernels (delta_rule)");
}

void Backend::matmul_heads(const Weight&, int64_t, const float*, int64_t, int64_t, int64_t, float*,
                           int64_t, int64_t) {
  fail(ErrorKind::Unsupported,
       name() + " has no multi-head latent attention kernels (matmul_heads)");
}

void Backend::copy_rows(float*, int64_t, const float*, int64_t, int64_t, int64_t) {
  fail(ErrorKind::Unsupported, name() + " has no multi-head latent attention kernels (copy_rows)");
}

void Backend::add_gated_rows(float*, const float*, const float*, int64_t, int64_t) {
  fail(ErrorKind::Unsupported, name() + " has no gated shared-expert kernel (add_gated_rows)");
}

void Backend::scale(float* x, int64_t n, float s) {
  std::vector<float> host(static_cast<size_t>(n));
  to_host(host.data(), x, host.size() * sizeof(float));
  for (float& v : host) v *= s;
  to_device(x, host.data(), host.size() * sizeof(float));
}

void Backend::zero(float* x, int64_t n) {
  const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
  to_device(x, zeros.data(), zeros.size() * sizeof(float));
}

void Backend::route(const float* logits, int64_t M, const RouterArgs& a, int32_t* ids,
                    float* weights) {
  const size_t E = static_cast<size_t>(a.n_expert), k = static_cast<size_t>(a.k);
  std::vector<float> host(static_cast<size_t>(M) * E), bias, expert_scale;
  to_host(host.data(), logits, host.size() * sizeof(float));
  RouterArgs h = a;
  if (a.bias != nullptr) {
    bias.resize(E);
    to_host(bias.data(), a.bias, E * sizeof(float));
    h.bias = bias.data();
  }
  if (a.expert_scale != nullptr) {
    expert_scale.resize(E);
    to_host(expert_scale.data(), a.expert_scale, E * sizeof(float));
    h.expert_scale = expert_scale.data();
  }
  std::vector<int32_t> host_ids(static_cast<size_t>(M) * k);
  std::vector<float> host_w(host_ids.size());
  for (size_t m = 0; m < static_cast<size_t>(M); ++m)
    route_token(host.data() + m * E, h, host_ids.data() + m * k, host_w.data() + m * k);
  to_device(ids, host_ids.data(), host_ids.size() * sizeof(int32_t));
  to_device(weights, host_w.data(), host_w.size() * sizeof(float));
}

void Backend::matmul_grouped(const Weight& shape, const void* const* weights, const int64_t* row0,
                             const int64_t* rows, int64_t G, const float* x, float* y) {
  for (int64_t g = 0; g < G; ++g) {
    if (rows[g] == 0) continue;
    Weight w = shape;
    w.data = weights[g];
    matmul(w, x + row0[g] * shape.cols, rows[g], y + row0[g] * shape.rows);
  }
}

void Backend::matmul_indexed(const Weight& shape, const void* const* experts, const int32_t* ids,
                             int64_t n, const float* x, int64_t x_stride, int64_t experts_per_x,
                             float* y) {
  check_experts_per_x(n, experts_per_x);
  std::vector<int32_t> host_ids(static_cast<size_t>(n));
  to_host(host_ids.data(), ids, host_ids.size() * sizeof(int32_t));
  for (int64_t i = 0; i < n; ++i) {
    Weight w = shape;
    to_host(&w.data, experts + host_ids[static_cast<size_t>(i)], sizeof(w.data));
    matmul(w, x + i / experts_per_x * x_stride, 1, y + i * shape.rows);
  }
}

void Backend::matmul_indexed_filling(const Weight& shape, const void* const* experts,
                                     void* const* fill, const int32_t* ids, int64_t n,
                                     const float* x, int64_t x_stride, int64_t experts_per_x,
                                     float* y) {
  matmul_indexed(shape, experts, ids, n, x, x_stride, experts_per_x, y);
  std::vector<int32_t> host_ids(static_cast<size_t>(n));
  to_host(host_ids.data(), ids, host_ids.size() * sizeof(int32_t));
  const size_t bytes = static_cast<size_t>(shape.rows) * shape.row_stride;
  std::vector<uint8_t> rows(bytes);
  for (const int32_t id : host_ids) {
    void* dst = nullptr;
    const void* src = nullptr;
    to_host(&dst, fill + id, sizeof(dst));
    if (dst == nullptr) continue;
    to_host(&src, experts + id, sizeof(src));
    to_host(rows.data(), src, bytes);
    to_device(dst, rows.data(), bytes);
  }
}

namespace {

// An ExpertPages' arrays read back to the host, and written again (the defaults of page_experts
// and commit_experts on a backend without kernels for them).
class HostPages {
 public:
  HostPages(Backend& b, const ExpertPages& p, const int32_t* ids, int64_t k)
      : b_(b), dev_(p), ids_(static_cast<size_t>(k)) {
    const auto E = static_cast<size_t>(p.n_expert), S = static_cast<size_t>(p.n_slots);
    read(slot_of_, p.slot_of, E);
    read(owner_, p.owner, S);
    read(stamp_, p.stamp, S + 1);
    read(counts_, p.counts, 2);
    read(host_, p.host, E);
    read(slot_, p.slot, S);
    read(table_, p.table, 3 * E);
    read(fill_, p.fill, 3 * E);
    b_.to_host(ids_.data(), ids, ids_.size() * sizeof(int32_t));
    view_ = p;
    view_.slot_of = slot_of_.data();
    view_.owner = owner_.data();
    view_.stamp = stamp_.data();
    view_.counts = counts_.data();
    view_.host = host_.data();
    view_.slot = slot_.data();
    view_.table = table_.data();
    view_.fill = fill_.data();
  }
  const ExpertPages& view() const { return view_; }
  const int32_t* ids() const { return ids_.data(); }
  void write_back() {
    write(dev_.slot_of, slot_of_);
    write(dev_.owner, owner_);
    write(dev_.stamp, stamp_);
    write(dev_.counts, counts_);
    write(dev_.table, table_);
    write(dev_.fill, fill_);
  }

 private:
  template <class T, class P>
  void read(std::vector<T>& v, P* src, size_t n) {
    v.resize(n);
    b_.to_host(v.data(), src, n * sizeof(T));
  }
  template <class T, class P>
  void write(P* dst, const std::vector<T>& v) {
    b_.to_device(const_cast<std::remove_const_t<P>*>(dst), v.data(), v.size() * sizeof(T));
  }
  Backend& b_;
  ExpertPages dev_, view_;
  std::vector<int32_t> ids_, slot_of_, owner_;
  std::vector<uint32_t> stamp_;
  std::vector<uint64_t> counts_;
  std::vector<const void*> host_, table_;
  std::vector<void*> slot_, fill_;
};

}  // namespace

void Backend::page_experts(const ExpertPages& p, const int32_t* ids, int64_t k) {
  HostPages h(*this, p, ids, k);
  if (!page_step(h.view(), h.ids(), k))
    fail(ErrorKind::Runtime, "internal: " + std::to_string(k) + " routed experts for " +
                                 std::to_string(p.n_slots) + " slots");
  h.write_back();
}

void Backend::commit_experts(const ExpertPages& p, const int32_t* ids, int64_t k) {
  HostPages h(*this, p, ids, k);
  commit_step(h.view(), h.ids(), k);
  h.write_back();
}

void Backend::combine_experts(const float* y, const int32_t* ids, const float* weights, int64_t M,
                              int64_t k, int64_t n, float* out) {
  std::vector<int32_t> host_ids(static_cast<size_t>(M * k));
  std::vector<float> host_w(static_cast<size_t>(M * k));
  to_host(host_ids.data(), ids, host_ids.size() * sizeof(int32_t));
  to_host(host_w.data(), weights, host_w.size() * sizeof(float));
  zero(out, M * n);
  const int32_t row0 = 0;
  for (int64_t m = 0; m < M; ++m) {
    const size_t first = static_cast<size_t>(m * k);
    std::vector<size_t> order(static_cast<size_t>(k));
    std::iota(order.begin(), order.end(), first);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return host_ids[a] < host_ids[b]; });
    for (size_t i : order)
      scatter_add_rows(out + m * n, y + static_cast<int64_t>(i) * n, &row0, &host_w[i], 1, n);
  }
}

void Backend::combine_add_rms_norm(const float* y, const int32_t* ids, const float* weights,
                                   int64_t k, float* x, const float* w, int64_t M, int64_t n,
                                   float eps, bool plus_one, float* sum, float* out) {
  combine_experts(y, ids, weights, M, k, n, sum);
  add_rms_norm(x, sum, w, M, n, eps, plus_one, out);
}

}  // namespace ts
