#include "backend/cpu/host_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

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
  pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const float v = x[i];
          x[i] = tanh ? 0.5f * v *
                            (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)))
                      : 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
        }
      },
      1024);
}

void full_attention(ThreadPool& pool, const float* q, const float* k, const float* v, int64_t rows,
                    int64_t heads, int64_t head_dim, float scale, float* out) {
  const int64_t width = heads * head_dim;
  // One task per (head, query row).
  pool.parallel_for(heads * rows, [&](int64_t t0, int64_t t1) {
    std::vector<float> p(static_cast<size_t>(rows));
    std::vector<double> acc(static_cast<size_t>(head_dim));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t h = t / rows, i = t % rows;
      const float* qi = q + i * width + h * head_dim;
      float top = -INFINITY;
      for (int64_t j = 0; j < rows; ++j) {
        const float* kj = k + j * width + h * head_dim;
        float s = 0;
        for (int64_t d = 0; d < head_dim; ++d) s += qi[d] * kj[d];
        p[static_cast<size_t>(j)] = s * scale;
        top = std::max(top, s * scale);
      }
      double sum = 0;
      for (float& x : p) {
        x = std::exp(x - top);
        sum += x;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < rows; ++j) {
        const float* vj = v + j * width + h * head_dim;
        const double pj = p[static_cast<size_t>(j)];
        for (int64_t d = 0; d < head_dim; ++d) acc[static_cast<size_t>(d)] += pj * vj[d];
      }
      float* o = out + i * width + h * head_dim;
      for (int64_t d = 0; d < head_dim; ++d)
        o[d] = static_cast<float>(acc[static_cast<size_t>(d)] / sum);
    }
  });
}

}  // namespace ts
