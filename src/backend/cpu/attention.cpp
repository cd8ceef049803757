#include "backend/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "quant/dequant.h"

namespace ts::cpu {
namespace {

// Keys per split: a decode over a long context is cut into this many keys per task (fewer would
// cost more in the combine than they save).
constexpr int64_t kKeysPerSplit = 128;

struct Partial {
  float max;
  float sum;
};

void quantize_q8_0_row(const float* src, int64_t n, uint8_t* dst) {
  // GGML q8_0: per 32 values an f16 scale d = max|x| / 127 and int8 round(x / d).
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* x = src + b * 32;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    uint8_t* blk = dst + b * 34;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(blk, &dh, 2);
    for (int i = 0; i < 32; ++i)
      blk[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[i] * id)));
  }
}

// Eight partial sums: lets the compiler vectorise without reassociating the float sum freely.
float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

__attribute__((target("f16c,avx"))) void f16_to_f32_f16c(const uint8_t* src, float* dst,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(
        dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = f16_to_f32(h);
  }
}

// One kv head's slice of a cache row as f32. The f16 cache (the default) is converted with F16C
// where the CPU has it: a scalar conversion here dominated prefill time.
void load_kv_head(DType dtype, const uint8_t* src, float* dst, int64_t n) {
  static const bool has_f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  if (dtype == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else if (dtype == DType::F16 && has_f16c) {
    f16_to_f32_f16c(src, dst, n);
  } else {
    dequantize_row(dtype, src, dst, n);
  }
}

}  // namespace

void store_kv_row(DType dtype, const float* src, int64_t width, uint8_t* dst) {
  switch (dtype) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(width) * 4);
      return;
    case DType::F16:
      for (int64_t i = 0; i < width; ++i) {
        const uint16_t h = f32_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < width; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::Q8_0:
      quantize_q8_0_row(src, width, dst);
      return;
    default:
      fail(ErrorKind::Unsupported,
           std::string("KV cache type ") + dtype_name(dtype) + " is not supported");
  }
}

void attention(ThreadPool& pool, const float* q, const KvView& kv, int64_t M, const int32_t* pos,
               const AttentionArgs& a, float* out) {
  const int64_t hd = a.head_dim;
  const int64_t group = a.n_head / a.n_head_kv;
  const size_t head_bytes = kv.row_bytes / static_cast<size_t>(a.n_head_kv);
  int64_t lo_all = INT64_MAX, hi_all = 0;
  std::vector<int64_t> lo(static_cast<size_t>(M)), hi(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    hi[static_cast<size_t>(m)] = pos[m] + 1;  // keys [lo, hi)
    lo[static_cast<size_t>(m)] = a.window > 0 ? std::max<int64_t>(0, pos[m] + 1 - a.window) : 0;
    lo_all = std::min(lo_all, lo[static_cast<size_t>(m)]);
    hi_all = std::max(hi_all, hi[static_cast<size_t>(m)]);
  }
  // Keys are split at fixed absolute positions (multiples of kKeysPerSplit), never by the thread
  // count or the micro-batch's span: each row then sums the same key ranges in the same order
  // whatever -t is and whichever micro-batch it came in (a range without keys for a row adds
  // exact zeros), so neither changes a result. Each split converts a key row once for every
  // query row and every head of its group.
  const int64_t first_split = lo_all / kKeysPerSplit;
  const int64_t splits = (hi_all + kKeysPerSplit - 1) / kKeysPerSplit - first_split;

  // partial outputs [M][n_head][splits][hd] and their (max, sum)
  std::vector<float> part_out(static_cast<size_t>(M * a.n_head * splits * hd), 0.0f);
  std::vector<Partial> part(static_cast<size_t>(M * a.n_head * splits),
                            Partial{-std::numeric_limits<float>::infinity(), 0.0f});

  pool.parallel_for(a.n_head_kv * splits, [&](int64_t t0, int64_t t1) {
    std::vector<float> k(static_cast<size_t>(hd)), v(static_cast<size_t>(hd));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = t % splits, g = t / splits;
      const int64_t j0 = std::max(lo_all, (first_split + s) * kKeysPerSplit),
                    j1 = std::min(hi_all, (first_split + s + 1) * kKeysPerSplit);
      for (int64_t j = j0; j < j1; ++j) {
        const size_t off =
            static_cast<size_t>(j) * kv.row_bytes + static_cast<size_t>(g) * head_bytes;
        load_kv_head(kv.dtype, static_cast<const uint8_t*>(kv.k) + off, k.data(), hd);
        load_kv_head(kv.dtype, static_cast<const uint8_t*>(kv.v) + off, v.data(), hd);
        for (int64_t m = 0; m < M; ++m) {
          if (j < lo[static_cast<size_t>(m)] || j >= hi[static_cast<size_t>(m)]) continue;
          for (int64_t h = g * group; h < (g + 1) * group; ++h) {
            float sc = dot(q + (m * a.n_head + h) * hd, k.data(), hd) * a.scale;
            if (a.softcap > 0) sc = a.softcap * std::tanh(sc / a.softcap);
            const size_t pi = static_cast<size_t>((m * a.n_head + h) * splits + s);
            Partial& p = part[pi];
            float* o = part_out.data() + pi * static_cast<size_t>(hd);
            // Online softmax: rescale what was accumulated when a larger score arrives.
            if (sc > p.max) {
              const float r = std::exp(p.max - sc);
              p.sum *= r;
              for (int64_t i = 0; i < hd; ++i) o[i] *= r;
              p.max = sc;
            }
            const float e = std::exp(sc - p.max);
            p.sum += e;
            for (int64_t i = 0; i < hd; ++i) o[i] += e * v[static_cast<size_t>(i)];
          }
        }
      }
    }
  });

  // Combine the splits of each (row, head): rescale each partial to the common max.
  for (int64_t r = 0; r < M * a.n_head; ++r) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t s = 0; s < splits; ++s)
      mx = std::max(mx, part[static_cast<size_t>(r * splits + s)].max);
    float* o = out + r * hd;
    std::fill_n(o, hd, 0.0f);
    float denom = 0;
    for (int64_t s = 0; s < splits; ++s) {
      const Partial& p = part[static_cast<size_t>(r * splits + s)];
      if (p.sum == 0) continue;
      const float w = std::exp(p.max - mx);
      denom += p.sum * w;
      const float* po = part_out.data() + (r * splits + s) * hd;
      for (int64_t i = 0; i < hd; ++i) o[i] += w * po[i];
    }
    for (int64_t i = 0; i < hd; ++i) o[i] /= denom;
  }
}

}  // namespace ts::cpu
