// Host ops of the stacks that run on the CPU only (the vision towers, the BERT encoder) that the
// Backend op set has no form of: LayerNorm with a bias, the two GELUs, and bidirectional attention
// over one image's patches or one text (the backend's attention kernel with every row reading
// every key). f32, [rows][width] row-major, split over the rows.
#pragma once

#include <cstdint>

namespace ts {

class Backend;
class ThreadPool;

// out = (x - mean) / sqrt(var + eps) * w + b over each row of n (out may be x).
void layer_norm(ThreadPool& pool, const float* x, const float* w, const float* b, int64_t rows,
                int64_t n, float eps, float* out);
// In place: GELU with the tanh approximation (tanh = true) or the exact erf form.
void gelu(ThreadPool& pool, float* x, int64_t n, bool tanh);
// Every query row attends to every key row (no mask): q, k, v and out [rows][heads * head_dim].
void full_attention(Backend& cpu, const float* q, const float* k, const float* v, int64_t rows,
                    int64_t heads, int64_t head_dim, float scale, float* out);

}  // namespace ts
