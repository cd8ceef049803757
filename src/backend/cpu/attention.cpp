#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "quant/dequant.h"

namespace ts::cpu {
namespace {

// Keys per split: long enough to amortise the combine, short enough that one decode token's
// keys spread over every thread.
constexpr int64_t kKeysPerSplit = 256;

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
    for (int i = 0; i < 32; ++i) blk[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[i] * id)));
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
      fail(ErrorKind::Unsupported, std::string("KV cache type ") + dtype_name(dtype) + " is not supported");
  }
}

void attention(ThreadPool& pool, const float* q, const KvView& kv, int64_t M, const int32_t* pos,
               const AttentionArgs& a, float* out) {
  const int64_t hd = a.head_dim;
  const int64_t group = a.n_head / a.n_head_kv;
  const size_t head_bytes = kv.row_bytes / static_cast<size_t>(a.n_head_kv);
  int64_t max_keys = 0;
  for (int64_t m = 0; m < M; ++m) max_keys = std::max<int64_t>(max_keys, pos[m] + 1);
  const int64_t splits = std::max<int64_t>(1, (max_keys + kKeysPerSplit - 1) / kKeysPerSplit);

  // partial outputs [M][n_head][splits][hd] and their (max, sum)
  std::vector<float> part_out(static_cast<size_t>(M * a.n_head * splits * hd));
  std::vector<Partial> part(static_cast<size_t>(M * a.n_head * splits));

  const int64_t tasks = M * a.n_head_kv * splits;
  pool.parallel_for(tasks, [&](int64_t t0, int64_t t1) {
    std::vector<float> k(static_cast<size_t>(hd)), v(static_cast<size_t>(hd));
    std::vector<float> score(static_cast<size_t>(group));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = t % splits;
      const int64_t g = (t / splits) % a.n_head_kv;
      const int64_t m = t / (splits * a.n_head_kv);
      const int64_t hi = pos[m] + 1;  // keys [lo, hi)
      const int64_t lo = a.window > 0 ? std::max<int64_t>(0, hi - a.window) : 0;
      const int64_t j0 = std::max(lo, s * kKeysPerSplit), j1 = std::min(hi, (s + 1) * kKeysPerSplit);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        const size_t pi = static_cast<size_t>((m * a.n_head + h) * splits + s);
        part[pi] = {-std::numeric_limits<float>::infinity(), 0.0f};
        std::fill_n(part_out.begin() + static_cast<std::ptrdiff_t>(pi * hd), hd, 0.0f);
      }
      for (int64_t j = j0; j < j1; ++j) {
        const size_t off = static_cast<size_t>(j) * kv.row_bytes + static_cast<size_t>(g) * head_bytes;
        dequantize_row(kv.dtype, static_cast<const uint8_t*>(kv.k) + off, k.data(), hd);
        dequantize_row(kv.dtype, static_cast<const uint8_t*>(kv.v) + off, v.data(), hd);
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const float* qh = q + (m * a.n_head + h) * hd;
          float dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += qh[i] * k[static_cast<size_t>(i)];
          float sc = dot * a.scale;
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
  });

  // Combine the splits of each (row, head).
  for (int64_t r = 0; r < M * a.n_head; ++r) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t s = 0; s < splits; ++s) mx = std::max(mx, part[static_cast<size_t>(r * splits + s)].max);
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
