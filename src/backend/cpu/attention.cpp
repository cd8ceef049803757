#include "backend/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/attention_tile.h"
#include "backend/cpu/matmul_kernels.h"
#include "core/error.h"
#include "quant/dequant.h"

namespace ts::cpu {
namespace {

// Keys per split: a decode over a long context is cut into this many keys per task (fewer would
// cost more in the combine than they save), times the lanes-by-dimensions of a row's heads over
// kSplitStateFloats: each split leaves a state of that size to combine, and MLA's 128 heads of
// 576 over one kv head left more state than keys (at 128 keys a split, a 16k-token decode wrote
// and combined 38 MB of it a layer).
constexpr int64_t kKeysPerSplit = 128;
constexpr int64_t kSplitStateFloats = 16384;
static_assert(kKeysPerSplit % kTileKeys == 0, "a split is whole tiles");
// Query vectors per block: four vectors of lanes, the score kernel's register tile; with GQA
// these are a few rows x every query head of one kv head, so each K / V tile is converted once
// for all of them.
constexpr int64_t kBlockQueries = 64;

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

// Rounds to nearest even, as f32_to_f16 does (the scalar conversion was a visible share of a
// prefill's time: docs/PERFORMANCE.md, "Measured choices").
__attribute__((target("f16c,avx"))) void f32_to_f16_f16c(const float* src, uint8_t* dst,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) {
    const uint16_t h = f32_to_f16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

bool has_f16c() {
  static const bool f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return f16c;
}

}  // namespace

// One kv head's slice of a cache row as f32. The f16 cache (the default) is converted with F16C
// where the CPU has it: a scalar conversion here dominated prefill time.
void load_kv_head(DType dtype, const uint8_t* src, float* dst, int64_t n) {
  if (dtype == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else if (dtype == DType::F16 && has_f16c()) {
    f16_to_f32_f16c(src, dst, n);
  } else {
    dequantize_row(dtype, src, dst, n);
  }
}

void store_kv_row(DType dtype, const float* src, int64_t width, uint8_t* dst) {
  switch (dtype) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(width) * 4);
      return;
    case DType::F16:
      if (has_f16c()) {
        f32_to_f16_f16c(src, dst, width);
        return;
      }
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

namespace {

// The buffers of one task: a block's queries and lane ranges, the state of the split being
// attended, the splits combined so far, and the tile work space (its pad columns stay zero).
struct TaskBuffers {
  TaskBuffers(int64_t Rp, int64_t hdp)
      : q(static_cast<size_t>(hdp * Rp)),
        lo(static_cast<size_t>(Rp)),
        hi(static_cast<size_t>(Rp)),
        acc_m(static_cast<size_t>(Rp)),
        acc_l(static_cast<size_t>(Rp)),
        acc_o(static_cast<size_t>(Rp * hdp)),
        split(static_cast<size_t>(Rp * (2 + hdp))),
        scratch(tile_scratch_floats(Rp, hdp), 0.0f) {
    ws.k = scratch.data();
    ws.v = ws.k + kTileKeys * hdp;
    ws.s = ws.v + kTileKeys * hdp;
    ws.alpha = ws.s + kTileKeys * Rp;
    ws.k_mixed = ws.alpha + Rp;
    ws.q_mixed = ws.k_mixed + kTileKeys * hdp;
  }
  std::vector<float> q, lo, hi, acc_m, acc_l, acc_o, split;
  std::vector<float> scratch;
  TileScratch ws;
};

// The split state stored at p: m[Rp], l[Rp], o[R][hdp].
LaneState lane_state(float* p, int64_t Rp) {
  return LaneState{p, p + Rp, p + 2 * Rp};
}

class Attention {
 public:
  Attention(const float* q, const KvView& kv, int64_t M, const int32_t* pos, const AttentionArgs& a,
            int threads)
      : q_(q), kv_(kv), a_(a) {
    group_ = a.n_head / a.n_head_kv;
    hd_ = a.head_dim;
    hdp_ = round_up_lanes(hd_);
    head_bytes_ = kv.row_bytes / static_cast<size_t>(a.n_head_kv);
    lo_.resize(static_cast<size_t>(M));
    hi_.resize(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      hi_[static_cast<size_t>(m)] =  // keys [lo, hi)
          a.key_end != nullptr ? std::max(pos[m] + 1, a.key_end[m]) : pos[m] + 1;
      lo_[static_cast<size_t>(m)] = a.window > 0 ? std::max<int64_t>(0, pos[m] + 1 - a.window) : 0;
      key_lo_ = std::min(key_lo_, lo_[static_cast<size_t>(m)]);
      key_hi_ = std::max(key_hi_, hi_[static_cast<size_t>(m)]);
    }
    keys_per_split_ = kKeysPerSplit * ((group_ * hdp_ + kSplitStateFloats - 1) / kSplitStateFloats);
    // A decode whose kv heads and splits are fewer tasks than the threads (MLA: one kv head, and
    // few splits of its wide ones) cuts each kv head's query heads into sub-groups of at least two
    // vectors of lanes, each a task over the same keys. Only the work is divided: a lane's
    // arithmetic does not depend on the block it is in.
    if (M == 1)
      while (a.n_head_kv * sub_groups_ * splits() < 2 * threads && group_ % 2 == 0 &&
             group_ / 2 >= 2 * kLanes) {
        group_ /= 2;
        sub_groups_ *= 2;
      }
    rows_per_block_ = std::max<int64_t>(1, kBlockQueries / group_);
    blocks_ = (M + rows_per_block_ - 1) / rows_per_block_;
    max_Rp_ = round_up_lanes(std::min(M, rows_per_block_) * group_);
    attend_ = active_isa() == Isa::Avx512 ? attend_keys_avx512
              : active_isa() == Isa::Avx2 ? attend_keys_avx2
                                          : attend_keys_generic;
  }

  // Query-head groups: the kv heads, each cut into sub_groups_.
  int64_t head_groups() const { return a_.n_head_kv * sub_groups_; }
  int64_t blocks() const { return blocks_; }
  int64_t rows_per_block() const { return rows_per_block_; }
  // The splits [first, first + count) that hold keys of some row.
  int64_t keys_per_split() const { return keys_per_split_; }
  int64_t first_split() const { return key_lo_ / keys_per_split_; }
  int64_t splits() const {
    return (key_hi_ + keys_per_split_ - 1) / keys_per_split_ - first_split();
  }
  // Floats of one split's LaneState for the largest block.
  int64_t split_floats() const { return max_Rp_ * (2 + hdp_); }
  TaskBuffers buffers() const { return TaskBuffers(max_Rp_, hdp_); }

  // Rows [m0, m1) and the query heads of head group g as a block; its keys are [key_lo, key_hi).
  QueryBlock block(int64_t g, int64_t m0, int64_t m1, TaskBuffers& buf, int64_t& key_lo,
                   int64_t& key_hi) const {
    QueryBlock b;
    b.R = (m1 - m0) * group_;
    b.Rp = round_up_lanes(b.R);
    b.hd = hd_;
    b.hdp = hdp_;
    const bool transposed = b.R >= kMinLaneQueries;
    std::fill(buf.q.begin(), buf.q.end(), 0.0f);
    for (int64_t r = 0; r < b.R; ++r) {
      const int64_t row = m0 + r / group_, h = g * group_ + r % group_;
      const float* src = q_ + (row * a_.n_head + h) * hd_;
      for (int64_t d = 0; d < hd_; ++d)
        buf.q[static_cast<size_t>(transposed ? d * b.Rp + r : r * hdp_ + d)] = src[d] * a_.scale;
    }
    b.q = buf.q.data();
    std::fill(buf.lo.begin(), buf.lo.end(), std::numeric_limits<float>::infinity());
    std::fill(buf.hi.begin(), buf.hi.end(), 0.0f);
    b.lo_max = 0;
    b.hi_min = INT64_MAX;
    key_lo = INT64_MAX;
    key_hi = 0;
    for (int64_t r = 0; r < b.R; ++r) {
      const int64_t lo = lo_[static_cast<size_t>(m0 + r / group_)];
      const int64_t hi = hi_[static_cast<size_t>(m0 + r / group_)];
      buf.lo[static_cast<size_t>(r)] = static_cast<float>(lo);
      buf.hi[static_cast<size_t>(r)] = static_cast<float>(hi);
      b.lo_max = std::max(b.lo_max, lo);
      b.hi_min = std::min(b.hi_min, hi);
      key_lo = std::min(key_lo, lo);
      key_hi = std::max(key_hi, hi);
    }
    b.lo = buf.lo.data();
    b.hi = buf.hi.data();
    return b;
  }

  // Keys [j0, j1) of head group g's kv head into `st`.
  void attend(const QueryBlock& b, int64_t g, int64_t j0, int64_t j1, const LaneState& st,
              const TileScratch& ws) const {
    const size_t off = static_cast<size_t>(g / sub_groups_) * head_bytes_;
    const KvHead kv{kv_.dtype, static_cast<const uint8_t*>(kv_.k) + off,
                    static_cast<const uint8_t*>(kv_.v) + off, kv_.row_bytes, head_bytes_};
    attend_(b, kv, j0, j1, a_.softcap, st, ws);
  }

  static void clear(const QueryBlock& b, TaskBuffers& buf) {
    std::fill_n(buf.acc_m.begin(), b.Rp, -std::numeric_limits<float>::infinity());
    std::fill_n(buf.acc_l.begin(), b.Rp, 0.0f);
    std::fill_n(buf.acc_o.begin(), b.R * b.hdp, 0.0f);
  }

  // Adds one split's state to the running combination: both rescaled to their common max. A
  // lane without keys in the split is left as it was, so a row's result depends only on its own
  // keys, not on the other rows of its block.
  static void fold(const QueryBlock& b, const LaneState& st, TaskBuffers& buf) {
    for (int64_t r = 0; r < b.R; ++r) {
      const float ms = st.m[r];
      if (ms == -std::numeric_limits<float>::infinity()) continue;
      float& m = buf.acc_m[static_cast<size_t>(r)];
      const float mx = std::max(m, ms);
      const float wa = std::exp(m - mx), ws = std::exp(ms - mx);
      buf.acc_l[static_cast<size_t>(r)] = buf.acc_l[static_cast<size_t>(r)] * wa + st.l[r] * ws;
      float* o = buf.acc_o.data() + r * b.hdp;
      const float* os = st.o + r * b.hdp;
      for (int64_t d = 0; d < b.hd; ++d) o[d] = o[d] * wa + os[d] * ws;
      m = mx;
    }
  }

  void write(const QueryBlock& b, int64_t g, int64_t m0, const TaskBuffers& buf, float* out) const {
    for (int64_t r = 0; r < b.R; ++r) {
      const int64_t row = m0 + r / group_, h = g * group_ + r % group_;
      float* o = out + (row * a_.n_head + h) * hd_;
      const float* acc = buf.acc_o.data() + r * b.hdp;
      float l = buf.acc_l[static_cast<size_t>(r)];
      // A sink adds its share of the denominator, relative to the row's running max (every row
      // has at least its own key, so the max is finite).
      if (a_.sinks != nullptr) l += std::exp(a_.sinks[h] - buf.acc_m[static_cast<size_t>(r)]);
      for (int64_t d = 0; d < hd_; ++d) o[d] = acc[d] / l;
    }
  }

 private:
  const float* q_;
  const KvView& kv_;
  const AttentionArgs& a_;
  int64_t group_ = 1, sub_groups_ = 1, hd_ = 0, hdp_ = 0, keys_per_split_ = kKeysPerSplit;
  size_t head_bytes_ = 0;
  std::vector<int64_t> lo_, hi_;
  int64_t key_lo_ = INT64_MAX, key_hi_ = 0;
  int64_t rows_per_block_ = 1, blocks_ = 1, max_Rp_ = kLanes;
  AttendKeysFn attend_ = nullptr;
};

// The split states a one-block call (decode) leaves, kept on the calling thread.
std::vector<float>& kept_split_states() {
  thread_local std::vector<float> kept;
  return kept;
}

// Floats a one-block call of M rows over keys [0, keys) keeps; 0 when the rows make more blocks.
uint64_t kept_floats(const AttentionArgs& a, int64_t keys, int64_t M, int threads) {
  const KvView kv{DType::F32,
                  keys,
                  a.n_head_kv * a.head_dim,
                  static_cast<size_t>(a.n_head_kv * a.head_dim) * 4,
                  nullptr,
                  nullptr};
  const std::vector<int32_t> pos(static_cast<size_t>(M), static_cast<int32_t>(keys - 1));
  const Attention at(nullptr, kv, M, pos.data(), a, threads);
  if (at.blocks() != 1) return 0;
  return static_cast<uint64_t>(at.head_groups() * at.splits() * at.split_floats());
}

}  // namespace

uint64_t attention_kept_bytes(const AttentionArgs& a, int64_t keys, int64_t max_rows, int threads) {
  if (keys <= 0 || a.n_head_kv <= 0 || a.head_dim <= 0) return 0;
  // One row cuts its heads into sub-groups; a block of several rows holds more lanes a split:
  // the largest is a whole block's rows (or the largest micro-batch, if fewer).
  uint64_t floats = kept_floats(a, keys, 1, threads);
  const int64_t group = a.n_head / a.n_head_kv;
  const int64_t block_rows = std::min(max_rows, std::max<int64_t>(1, kBlockQueries / group));
  if (block_rows > 1) floats = std::max(floats, kept_floats(a, keys, block_rows, threads));
  return 4 * floats;
}

uint64_t full_attention_kept_bytes(const AttentionArgs& a, int64_t max_rows, int threads) {
  if (max_rows <= 0 || a.n_head_kv <= 0 || a.head_dim <= 0) return 0;
  // Only a text of one block keeps states; its splits and lanes grow with its rows.
  const int64_t rows =
      std::min(max_rows, std::max<int64_t>(1, kBlockQueries / (a.n_head / a.n_head_kv)));
  return 4 * kept_floats(a, rows, rows, threads);
}

uint64_t attention_kept_now() {
  return 4 * static_cast<uint64_t>(kept_split_states().capacity());
}

void attention(ThreadPool& pool, const float* q, const KvView& kv, int64_t M, const int32_t* pos,
               const AttentionArgs& a, float* out) {
  const Attention at(q, kv, M, pos, a, pool.size());
  const int64_t G = at.head_groups();
  // Keys are split at fixed absolute positions (multiples of keys_per_split) and the splits of a
  // row are always combined in order, one at a time, so a row's result depends neither on the
  // thread count nor on which micro-batch or block it came in. Where the rows make one block
  // (decode), the splits of each kv head run as separate tasks; otherwise each task is one block
  // of one kv head and attends its splits in turn.
  if (at.blocks() == 1) {
    const int64_t first = at.first_split(), splits = at.splits(), per_split = at.split_floats();
    const int64_t S = at.keys_per_split();
    // Kept from call to call: a fresh buffer of this size is fresh pages, faulted in every step.
    // (The workers must use the caller's buffer: a thread_local named in the lambdas would be
    // each worker's own.)
    // Grown to exactly what a call needs (a resize could leave up to twice that allocated).
    std::vector<float>& kept = kept_split_states();
    if (const auto need = static_cast<size_t>(G * splits * per_split); need > kept.size())
      kept = std::vector<float>(need);
    float* const parts = kept.data();
    // Tasks in key-range order: a thread's consecutive tasks are the kv heads of one range of
    // keys, whose slices share the cache's rows, rather than one head's slices of every row (each
    // 1 / G of a row): more cache bytes a second (docs/PERFORMANCE.md, "Measured choices").
    pool.parallel_for(G * splits, [&](int64_t t0, int64_t t1) {
      TaskBuffers buf = at.buffers();
      QueryBlock b;
      int64_t built = -1, lo = 0, hi = 0;  // the kv head whose block b is
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t g = t % G, i = t / G, s = first + i;  // split i of kv head g
        if (g != built) b = at.block(g, 0, M, buf, lo, hi);
        built = g;
        at.attend(b, g, std::max(lo, s * S), std::min(hi, (s + 1) * S),
                  lane_state(parts + (g * splits + i) * per_split, b.Rp), buf.ws);
      }
    });
    pool.parallel_for(G, [&](int64_t g0, int64_t g1) {
      TaskBuffers buf = at.buffers();
      for (int64_t g = g0; g < g1; ++g) {
        int64_t lo = 0, hi = 0;
        const QueryBlock b = at.block(g, 0, M, buf, lo, hi);
        Attention::clear(b, buf);
        for (int64_t s = 0; s < splits; ++s)
          Attention::fold(b, lane_state(parts + (g * splits + s) * per_split, b.Rp), buf);
        at.write(b, g, 0, buf, out);
      }
    });
    return;
  }
  // Blocks inner: the pieces the pool hands out then mix short (early) and long (late) blocks.
  pool.parallel_for(G * at.blocks(), [&](int64_t t0, int64_t t1) {
    TaskBuffers buf = at.buffers();
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t g = t / at.blocks(), m0 = t % at.blocks() * at.rows_per_block();
      int64_t lo = 0, hi = 0;
      const QueryBlock b = at.block(g, m0, std::min(M, m0 + at.rows_per_block()), buf, lo, hi);
      const LaneState st = lane_state(buf.split.data(), b.Rp);
      Attention::clear(b, buf);
      const int64_t S = at.keys_per_split();
      for (int64_t s = lo / S; s * S < hi; ++s) {
        at.attend(b, g, std::max(lo, s * S), std::min(hi, (s + 1) * S), st, buf.ws);
        Attention::fold(b, st, buf);
      }
      at.write(b, g, m0, buf, out);
    }
  });
}

}  // namespace ts::cpu
