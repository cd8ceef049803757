#include "backend/cpu/host_ops.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/activations.h"
#include "backend/cpu/matmul_kernels.h"
#include "core/thread_pool.h"

namespace ts {

void layer_norm(ThreadPool& pool, const float* x, const float* w, const float* b, int64_t rows,
                int64_t n, float eps, float* out) {
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      float* o = out + r * n;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < n; ++i) sum += xr[i];
      const double mean = sum / static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) sq += (xr[i] - mean) * (xr[i] - mean);
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>((xr[i] - mean) * inv) * w[i] + b[i];
    }
  });
}

void gelu(ThreadPool& pool, float* x, int64_t n, bool tanh) {
  const bool wide = tanh && cpu::active_isa() == cpu::Isa::Avx512;
  pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        if (wide) return cpu::gelu_tanh_avx512(x + i0, i1 - i0, x + i0);
        for (int64_t i = i0; i < i1; ++i) {
          const float v = x[i];
          x[i] = tanh ? 0.5f * v *
                            (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)))
                      : 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
        }
      },
      1024);
}

void full_attention(Backend& cpu, const float* q, const float* k, const float* v, int64_t rows,
                    int64_t heads, int64_t head_dim, float scale, float* out) {
  // The patches' keys and values are already laid out as an f32 cache of `rows` rows; every row
  // reads up to the last (key_end), so the backend's causal kernel attends both ways.
  const int64_t width = heads * head_dim;
  const KvView kv{.dtype = DType::F32,
                  .capacity = rows,
                  .width = width,
                  .row_bytes = static_cast<size_t>(width) * sizeof(float),
                  .k = const_cast<float*>(k),
                  .v = const_cast<float*>(v)};
  std::vector<int32_t> pos(static_cast<size_t>(rows));
  std::iota(pos.begin(), pos.end(), 0);
  const std::vector<int32_t> key_end(static_cast<size_t>(rows), static_cast<int32_t>(rows));
  AttentionArgs a;
  a.n_head = heads;
  a.n_head_kv = heads;
  a.head_dim = head_dim;
  a.scale = scale;
  a.key_end = key_end.data();
  cpu.attention(q, kv, rows, pos.data(), a, out);
}

}  // namespace ts
