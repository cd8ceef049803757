// The CPU backend: ops on host memory, rows split across a thread pool. Matmuls go through the
// per-dtype kernels of matmul_kernels.h; everything else is plain f32 loops the compiler
// vectorises.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/activations.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/delta_net.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/panel_layout.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/dequant.h"

namespace ts {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads > 0 ? threads : physical_cores()) {}

  std::string name() const override {
    return "cpu (" + std::string(cpu::matmul_isa()) + ", " + std::to_string(pool_.size()) +
           " threads)";
  }

  void* alloc(size_t bytes) override {
    // 64-byte alignment: whole cache lines and aligned AVX-512 loads; page alignment for large
    // buffers (expert slots), which O_DIRECT reads fill in place.
    const size_t align = bytes >= (size_t{1} << 20) ? 4096 : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (p == nullptr)
      fail(ErrorKind::Runtime, "out of memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded == 0 ? 64 : rounded);
    return p;
  }
  void free(void* p) override { std::free(p); }
  bool is_host() const override { return true; }
  // The attention's split states, kept between decode steps (cpu/attention.h).
  uint64_t scratch_bytes(const ScratchPlan& p) const override {
    AttentionArgs a;
    a.n_head = p.n_head;
    a.n_head_kv = p.n_head_kv;
    a.head_dim = p.head_dim;
    return cpu::attention_kept_bytes(a, p.ctx, p.max_rows, pool_.size());
  }
  void to_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }

  Weight upload_weight(DType dtype, int64_t rows, int64_t cols, size_t row_stride,
                       const void* host) override {
    return Weight{dtype, rows, cols, row_stride, host};
  }
  void release_weight(Weight& w) override { w = Weight{}; }

  // q8_0, q4_k, q5_k, q6_k and iq4_xs weights whose rows fill whole panels go to the panel layout
  // where its kernels run: in place, so the weight's memory stays what the footprint counts.
  void pack_weight(Weight& w) override {
    if (!packs(w)) return;
    pool_.parallel_for(w.rows / cpu::kPanelRows, [&](int64_t p0, int64_t p1) {
      cpu::pack_panels(w.dtype, writable(w), w.rows, w.cols, w.row_stride, p0, p1);
    });
    w.layout = WeightLayout::Panels;
  }
  // On a reader thread: the pool belongs to the compute thread.
  void pack_expert_weight(Weight& w) override {
    if (!packs(w)) return;
    cpu::pack_panels(w.dtype, writable(w), w.rows, w.cols, w.row_stride, 0,
                     w.rows / cpu::kPanelRows);
    w.layout = WeightLayout::Panels;
  }
  // A panel fills exactly its rows' bytes: rows with padding between them are left as they are.
  bool packs(const Weight& w) const {
    return weight_row_group(w.dtype) > 1 && cpu::panel_layout_fits(w.dtype, w.rows) &&
           w.layout == WeightLayout::Rows && w.row_stride == row_bytes(w.dtype, w.cols, "weight");
  }
  // The caller owns a packed weight's bytes (see Backend::pack_weight); Weight holds them const
  // for the ops, which only read.
  static uint8_t* writable(const Weight& w) {
    return static_cast<uint8_t*>(const_cast<void*>(w.data));
  }
  int64_t weight_row_group(DType dtype) const override {
    return cpu::panel_layout_fits(dtype, cpu::kPanelRows) && cpu::panel_kernels_active()
               ? cpu::kPanelRows
               : 1;
  }

  void embed(const Weight& table, const int32_t* ids, int64_t M, float scale, float* out) override {
    for (int64_t m = 0; m < M; ++m) {
      if (ids[m] < 0 || ids[m] >= table.rows)
        fail(ErrorKind::Input, "token id " + std::to_string(ids[m]) +
                                   " is outside the vocabulary of " + std::to_string(table.rows));
      const auto* data = static_cast<const uint8_t*>(table.data);
      float* o = out + m * table.cols;
      if (table.layout == WeightLayout::Panels)
        cpu::panel_row_to_f32(table.dtype, data, table.row_stride, ids[m], table.cols, o);
      else
        dequantize_row(table.dtype, data + static_cast<size_t>(ids[m]) * table.row_stride, o,
                       table.cols);
      if (scale != 1.0f)
        for (int64_t i = 0; i < table.cols; ++i) o[i] *= scale;
    }
  }

  void rms_norm(const float* x, const float* w, int64_t M, int64_t n, float eps, bool plus_one,
                float* out) override {
    rows(M, n, [&](int64_t m) { norm_row(x + m * n, w, n, eps, plus_one, out + m * n); });
  }

  void rms_norm_heads(float* x, const float* w, int64_t M, int64_t n_heads, int64_t head_dim,
                      float eps, bool plus_one) override {
    rows(M * n_heads, head_dim, [&](int64_t r) {
      norm_row(x + r * head_dim, w, head_dim, eps, plus_one, x + r * head_dim);
    });
  }

  void matmul(const Weight& w, const float* x, int64_t M, float* y) override {
    if (M > 1)
      cpu::pack_activations_parallel(pool_, w.dtype, x, M, w.cols, packed_);
    else
      cpu::pack_activations(w.dtype, x, M, w.cols, packed_);
    const cpu::WeightView view{
        w.dtype, static_cast<const uint8_t*>(w.data), w.rows, w.cols, w.row_stride, w.layout};
    // Grain of 16 rows keeps each piece a few cache lines of output and many KB of weights; a
    // packed weight is split at whole panels.
    const int64_t grain = w.layout == WeightLayout::Panels ? cpu::kPanelRows : 16;
    pool_.parallel_for(
        w.rows, [&](int64_t r0, int64_t r1) { cpu::matmul_rows(view, packed_, r0, r1, y, w.rows); },
        grain);
  }

  // Heads in parallel: each one's rows of x gathered and packed (by the task: a few rows of one
  // head's width), its block of w multiplied straight into its columns of y.
  void matmul_heads(const Weight& w, int64_t n_heads, const float* x, int64_t x_stride,
                    int64_t x_head, int64_t M, float* y, int64_t y_stride,
                    int64_t y_head) override {
    const int64_t rows = w.rows / n_heads, cols = w.cols;
    pool_.parallel_for(
        n_heads,
        [&](int64_t h0, int64_t h1) {
          std::vector<float> xh(static_cast<size_t>(M * cols));
          cpu::PackedActs packed;
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t m = 0; m < M; ++m)
              std::memcpy(xh.data() + m * cols, x + m * x_stride + h * x_head,
                          static_cast<size_t>(cols) * sizeof(float));
            cpu::pack_activations(w.dtype, xh.data(), M, cols, packed);
            const cpu::WeightView view{
                w.dtype,
                static_cast<const uint8_t*>(w.data) + static_cast<size_t>(h * rows) * w.row_stride,
                rows,
                cols,
                w.row_stride,
                w.layout};
            cpu::matmul_rows(view, packed, 0, rows, y + h * y_head, y_stride);
          }
        },
        1);
  }

  void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                 int64_t n_rows, int64_t n) override {
    rows(n_rows, n, [&](int64_t r) {
      std::memcpy(dst + r * dst_stride, src + r * src_stride,
                  static_cast<size_t>(n) * sizeof(float));
    });
  }

  void add_bias(float* y, const float* b, int64_t M, int64_t n) override {
    rows(M, n, [&](int64_t m) {
      for (int64_t i = 0; i < n; ++i) y[m * n + i] += b[i];
    });
  }

  void zero(float* x, int64_t n) override {
    std::memset(x, 0, static_cast<size_t>(n) * sizeof(float));
  }

  void scale(float* x, int64_t n, float s) override {
    spans(n, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) x[i] *= s;
    });
  }

  void add(float* y, const float* x, int64_t n) override {
    spans(n, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] += x[i];
    });
  }

  void rope(float* x, int64_t M, int64_t n_heads, const int32_t* pos, const RopeArgs& r) override {
    const int64_t half = r.rotary_dim / 2;
    // sin and cos dominate: a row's cost is its half-rotary angles plus the rotations.
    spans(M, half * (8 + n_heads),
          [&](int64_t m0, int64_t m1) { rope_rows(x, m0, m1, n_heads, pos, r); });
  }

  static void rope_rows(float* x, int64_t m0, int64_t m1, int64_t n_heads, const int32_t* pos,
                        const RopeArgs& r) {
    const int64_t half = r.rotary_dim / 2;
    std::vector<float> cs(static_cast<size_t>(2 * half));
    for (int64_t m = m0; m < m1; ++m) {
      // The angle is computed in f32 as PyTorch does (position x inverse frequency), so that long
      // positions round the same way as the reference.
      for (int64_t i = 0; i < half; ++i) {
        const int32_t p = r.pair_stream != nullptr ? pos[3 * m + r.pair_stream[i]] : pos[m];
        const float angle = static_cast<float>(p) * r.inv_freq[i];
        cs[2 * i] = std::cos(angle);
        cs[2 * i + 1] = std::sin(angle);
      }
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (m * n_heads + h) * r.head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = r.neox ? i : 2 * i;
          const int64_t b = r.neox ? i + half : 2 * i + 1;
          const float c = cs[2 * i], s = cs[2 * i + 1];
          const float x0 = v[a], x1 = v[b];
          v[a] = x0 * c - x1 * s;
          v[b] = x0 * s + x1 * c;
        }
      }
    }
  }

  void kv_store(const KvView& kv, const float* k, const float* v, int64_t M,
                const int32_t* pos) override {
    for (int64_t m = 0; m < M; ++m)
      if (pos[m] < 0 || pos[m] >= kv.capacity)
        fail(ErrorKind::Input, "position " + std::to_string(pos[m]) +
                                   " is outside the KV cache of " + std::to_string(kv.capacity));
    rows(M, 2 * kv.width, [&](int64_t m) {
      const size_t off = static_cast<size_t>(pos[m]) * kv.row_bytes;
      cpu::store_kv_row(kv.dtype, k + m * kv.width, kv.width, static_cast<uint8_t*>(kv.k) + off);
      cpu::store_kv_row(kv.dtype, v + m * kv.width, kv.width, static_cast<uint8_t*>(kv.v) + off);
    });
  }

  void attention(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                 const AttentionArgs& a, float* out) override {
    cpu::attention(pool_, q, kv, M, pos, a, out);
  }

  void glu(Glu act, const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
           float* out) override {
    const bool wide = cpu::active_isa() == cpu::Isa::Avx512;
    // One contiguous run of a row: elements [i, i + len) of row r.
    const auto run = [&](int64_t r, int64_t i, int64_t len) {
      const float* g = gate + r * stride + i;
      const float* u = up + r * stride + i;
      float* o = out + r * n + i;
      if (act == Glu::SiLU && wide) {
        cpu::swiglu_avx512(g, u, len, o);
      } else if (act == Glu::GeluTanh && wide) {
        cpu::geglu_avx512(g, u, len, o);
      } else if (act == Glu::SiLU) {
        for (int64_t j = 0; j < len; ++j) o[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
      } else if (act == Glu::Sigmoid) {
        for (int64_t j = 0; j < len; ++j) o[j] = u[j] / (1.0f + std::exp(-g[j]));
      } else {
        constexpr float kSqrt2OverPi = 0.7978845608028654f;
        for (int64_t j = 0; j < len; ++j)
          o[j] = 0.5f * g[j] *
                 (1.0f + std::tanh(kSqrt2OverPi * (g[j] + 0.044715f * g[j] * g[j] * g[j]))) * u[j];
      }
    };
    // The rows' elements as one range, so that a single row is split across threads as well.
    spans(rows * n, kTranscendentalCost, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1;) {
        const int64_t r = e / n, i = e % n, len = std::min(n - i, e1 - e);
        run(r, i, len);
        e += len;
      }
    });
  }

  void glu_clamped(const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
                   const ClampedSwiGlu& p, float* out) override {
    spans(rows * n, kTranscendentalCost, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) {
        const int64_t r = e / n, i = e % n;
        // In transformers' order: clamp, g * sigmoid(g * alpha), then (u + 1) times that.
        const float g = std::min(gate[r * stride + i], p.limit);
        const float u = std::clamp(up[r * stride + i], -p.limit, p.limit);
        const float glu = g * (1.0f / (1.0f + std::exp(-(g * p.alpha))));
        out[r * n + i] = (u + 1.0f) * glu;
      }
    });
  }

  void conv_silu(float* x, int64_t M, int64_t channels, const float* taps, int64_t kernel,
                 float* window) override {
    spans(channels, M * kernel, [&](int64_t c0, int64_t c1) {
      cpu::conv_silu_channels(x, M, channels, taps, kernel, window, c0, c1);
    });
  }

  void delta_rule(const float* qkv, const float* beta, const float* alpha, int64_t M,
                  const DeltaRuleArgs& a, float* state, float* out) override {
    // Value heads are independent: each thread takes whole heads through every row.
    spans(a.n_v_heads, 4 * M * a.k_head_dim * a.v_head_dim, [&](int64_t h0, int64_t h1) {
      cpu::delta_rule_heads(qkv, beta, alpha, M, a, state, out, h0, h1);
    });
  }

  void add_gated_rows(float* y, const float* x, const float* g, int64_t M, int64_t n) override {
    rows(M, n, [&](int64_t m) {
      const float s = 1.0f / (1.0f + std::exp(-g[m]));
      for (int64_t i = 0; i < n; ++i) y[m * n + i] += s * x[m * n + i];
    });
  }

  void scatter_add_rows(float* y, const float* x, const int32_t* idx, const float* scale, int64_t M,
                        int64_t n) override {
    for (int64_t m = 0; m < M; ++m) {
      float* dst = y + static_cast<int64_t>(idx[m]) * n;
      for (int64_t i = 0; i < n; ++i) dst[i] += scale[m] * x[m * n + i];
    }
  }

  void gather_rows(const float* x, const int32_t* idx, int64_t M, int64_t n, float* out) override {
    for (int64_t m = 0; m < M; ++m)
      std::memcpy(out + m * n, x + static_cast<int64_t>(idx[m]) * n, n * sizeof(float));
  }

  // A row of a 151,936-entry vocabulary is ~150k exponentials in double: the rows go to the
  // pool. Each row's value is the same whichever thread computes it.
  void nll_rows(const float* logits, int64_t n, int64_t V, const int32_t* targets,
                double* nll) override {
    pool_.parallel_for(n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) nll[r] = nll_of_row(logits + r * V, V, targets[r]);
    });
  }

  void softcap(float* x, int64_t n, float cap) override {
    spans(n, kTranscendentalCost, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) x[i] = cap * std::tanh(x[i] / cap);
    });
  }

 private:
  // Element-wise work is split across the pool only when there is enough of it: handing a loop
  // to the workers costs about a microsecond, a few thousand simple element operations.
  static constexpr int64_t kMinParallelWork = 8192;
  // An exp or tanh costs about ten simple operations.
  static constexpr int64_t kTranscendentalCost = 10;

  // fn(i0, i1) over [0, n), where one item costs about `cost` simple operations.
  template <class Fn>
  void spans(int64_t n, int64_t cost, const Fn& fn) {
    if (n * cost < 2 * kMinParallelWork || pool_.size() == 1) {
      fn(0, n);
      return;
    }
    const int64_t grain = std::max<int64_t>(1, kMinParallelWork / cost);
    pool_.parallel_for(
        n, [&](int64_t i0, int64_t i1) { fn(i0, i1); }, grain);
  }

  // fn(i) for each of n rows of about `cost` operations each.
  template <class Fn>
  void rows(int64_t n, int64_t cost, const Fn& fn) {
    spans(n, cost, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) fn(i);
    });
  }

  static void norm_row(const float* x, const float* w, int64_t n, float eps, bool plus_one,
                       float* out) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * (plus_one ? 1.0f + w[i] : w[i]);
  }

  ThreadPool pool_;
  cpu::PackedActs packed_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace ts
