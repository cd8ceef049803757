// The CPU backend's attention against a double-precision softmax over the cache as stored, for
// decode and prefill shapes, GQA groups that take each score path (lanes over query vectors from
// 4 of them up, keys and queries interleaved in the lanes for 4 to 8 on AVX-512, dot products
// below), head dims that are not a multiple of the vector width,
// sliding windows, softcap and every KV cache type; and the invariances the split design
// promises: the same result for any thread count, and a row's result independent of the other
// rows it is attended with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "quant/dequant.h"
#include "quant/dtype.h"

namespace ts {
namespace {

struct Case {
  int64_t n_head, n_head_kv, head_dim;
  float softcap;
  int64_t window;
  std::vector<int32_t> pos;  // one query row per entry
};

std::vector<int32_t> run_of(int32_t first, int32_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = first + i;
  return p;
}

const DType kKvTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

class CpuAttention : public ::testing::Test {
 protected:
  // A cache of `fill` random rows (through the backend's own kv_store) and random queries.
  struct Setup {
    KvView kv;
    std::vector<uint8_t> k, v;
    std::vector<float> q;
    AttentionArgs args;
  };

  Setup make(const Case& c, DType dt) {
    Setup s;
    const int64_t width = c.n_head_kv * c.head_dim;
    const int64_t fill = 1 + *std::max_element(c.pos.begin(), c.pos.end());
    s.kv.dtype = dt;
    s.kv.capacity = fill;
    s.kv.width = width;
    s.kv.row_bytes = static_cast<size_t>(row_bytes(dt, static_cast<uint64_t>(width), "kv"));
    s.k.resize(s.kv.row_bytes * static_cast<size_t>(fill));
    s.v.resize(s.k.size());
    s.kv.k = s.k.data();
    s.kv.v = s.v.data();
    const std::vector<float> k = randn(fill * width), v = randn(fill * width);
    cpu1_->kv_store(s.kv, k.data(), v.data(), fill, run_of(0, static_cast<int32_t>(fill)).data());
    s.q = randn(static_cast<int64_t>(c.pos.size()) * c.n_head * c.head_dim);
    s.args = AttentionArgs{c.n_head,   c.n_head_kv,
                           c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                           c.softcap,  c.window};
    return s;
  }

  // The softmax of the scaled (and capped) scores over each row's keys, in double, over the
  // cache rows as stored (dequantised).
  static std::vector<float> reference(const Case& c, const Setup& s) {
    const int64_t hd = c.head_dim, group = c.n_head / c.n_head_kv;
    const int64_t fill = s.kv.capacity;
    std::vector<float> k(static_cast<size_t>(fill * s.kv.width)), v(k.size());
    for (int64_t j = 0; j < fill; ++j) {
      dequantize_row(s.kv.dtype, s.k.data() + j * s.kv.row_bytes, k.data() + j * s.kv.width,
                     s.kv.width);
      dequantize_row(s.kv.dtype, s.v.data() + j * s.kv.row_bytes, v.data() + j * s.kv.width,
                     s.kv.width);
    }
    std::vector<float> out(s.q.size());
    for (size_t m = 0; m < c.pos.size(); ++m) {
      const int64_t hi = c.pos[m] + 1;
      const int64_t lo = c.window > 0 ? std::max<int64_t>(0, hi - c.window) : 0;
      for (int64_t h = 0; h < c.n_head; ++h) {
        const float* q = s.q.data() + (static_cast<int64_t>(m) * c.n_head + h) * hd;
        const int64_t off = h / group * hd;
        std::vector<double> sc;
        for (int64_t j = lo; j < hi; ++j) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += double(q[i]) * k[j * s.kv.width + off + i];
          d *= s.args.scale;
          if (c.softcap > 0) d = c.softcap * std::tanh(d / c.softcap);
          sc.push_back(d);
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double denom = 0;
        for (double& x : sc) denom += (x = std::exp(x - mx));
        for (int64_t i = 0; i < hd; ++i) {
          double o = 0;
          for (int64_t j = lo; j < hi; ++j) o += sc[j - lo] * v[j * s.kv.width + off + i];
          out[(static_cast<int64_t>(m) * c.n_head + h) * hd + i] = static_cast<float>(o / denom);
        }
      }
    }
    return out;
  }

  static std::vector<float> run(Backend& b, const Case& c, const Setup& s) {
    std::vector<float> out(s.q.size());
    b.attention(s.q.data(), s.kv, static_cast<int64_t>(c.pos.size()), c.pos.data(), s.args,
                out.data());
    return out;
  }

  std::vector<float> randn(int64_t n) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) e = dist(rng_);
    return x;
  }

  std::unique_ptr<Backend> cpu1_ = make_cpu_backend(1), cpu3_ = make_cpu_backend(3);
  std::mt19937 rng_{99};
};

const Case kCases[] = {
    {8, 2, 64, 0.0f, 0, {0}},
    {32, 8, 64, 0.0f, 0, {777}},               // decode over many splits, GQA 4
    {4, 4, 64, 0.0f, 0, {300}},                // decode without GQA: dot products
    {16, 2, 128, 0.0f, 0, {700}},              // decode, GQA 8: two keys a vector (AVX-512)
    {12, 2, 80, 30.0f, 100, {450}},            // decode, GQA 6, hd 80, window and softcap
    {6, 2, 80, 0.0f, 64, {500}},               // window; head_dim not a multiple of 16
    {4, 4, 256, 50.0f, 0, {300}},              // softcap, head_dim 256
    {32, 8, 64, 0.0f, 0, run_of(0, 130)},      // prefill from 0: several blocks
    {32, 8, 64, 0.0f, 0, run_of(250, 70)},     // prefill across a split boundary
    {8, 8, 80, 0.0f, 0, run_of(60, 67)},       // no GQA: a 3-row last block
    {12, 4, 64, 30.0f, 100, run_of(200, 40)},  // GQA 3, window and softcap
    {4, 2, 32, 0.0f, 0, {5, 90, 3, 600, 600, 17, 127, 128}},  // scattered rows in one block
    // MLA's shape (DeepSeek-V3): 128 heads over one kv head of 576. Its splits are 640 keys (the
    // state of 128 x 576 lanes is large); a decode of few splits cuts the heads into sub-groups.
    {128, 1, 576, 0.0f, 0, {1500}},
    {128, 1, 576, 0.0f, 0, {300}},
    {128, 1, 576, 0.0f, 0, run_of(630, 12)},  // prefill: a block a row, across a split boundary
};

// f32 sums over up to 800 keys against a double reference: outputs are convex combinations of
// N(0, 1) values and agree to ~1e-6 (5e-6 allowed).
TEST_F(CpuAttention, MatchesDoubleReference) {
  for (DType dt : kKvTypes) {
    for (const Case& c : kCases) {
      if (dt == DType::Q8_0 && c.head_dim % 32 != 0) continue;  // heads must be whole blocks
      const Setup s = make(c, dt);
      const std::vector<float> want = reference(c, s), got = run(*cpu1_, c, s);
      float worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      EXPECT_LE(worst, 5e-6f) << dtype_name(dt) << " heads " << c.n_head << "/" << c.n_head_kv
                              << " hd " << c.head_dim << " rows " << c.pos.size();
    }
  }
}

TEST_F(CpuAttention, SameForOneAndThreeThreads) {
  for (const Case& c : kCases) {
    const Setup s = make(c, DType::F16);
    const std::vector<float> one = run(*cpu1_, c, s), three = run(*cpu3_, c, s);
    EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float)))
        << "heads " << c.n_head << "/" << c.n_head_kv << " rows " << c.pos.size();
  }
}

// Each row of a prefill alone (as decode attends it) gives bit for bit the row's prefill result,
// where the decode row has 4 or more query heads per kv head: its scores take the same operations
// as the prefill block's, lanes per query or (AVX-512, up to 8 heads) keys and queries interleaved.
// MLA's rows alone are cut into head sub-groups (one thread, one or two splits), in the prefill
// they are not.
TEST_F(CpuAttention, PrefillRowsEqualTheRowsAlone) {
  for (const Case& c :
       {Case{32, 8, 64, 0.0f, 0, run_of(250, 70)}, Case{12, 3, 80, 20.0f, 90, run_of(100, 45)},
        Case{16, 2, 64, 0.0f, 0, run_of(120, 20)}, Case{12, 2, 80, 0.0f, 0, run_of(60, 10)},
        Case{128, 1, 576, 0.0f, 0, run_of(630, 12)}}) {
    const Setup s = make(c, DType::F16);
    const std::vector<float> all = run(*cpu3_, c, s);
    const int64_t row = c.n_head * c.head_dim;
    for (size_t m = 0; m < c.pos.size(); ++m) {
      Setup one = s;
      one.kv.k = one.k.data();
      one.kv.v = one.v.data();
      one.q.assign(s.q.begin() + static_cast<int64_t>(m) * row,
                   s.q.begin() + static_cast<int64_t>(m + 1) * row);
      const Case single{c.n_head, c.n_head_kv, c.head_dim, c.softcap, c.window, {c.pos[m]}};
      const std::vector<float> alone = run(*cpu1_, single, one);
      EXPECT_EQ(0, std::memcmp(alone.data(), all.data() + static_cast<int64_t>(m) * row,
                               static_cast<size_t>(row) * sizeof(float)))
          << "row " << m << " of heads " << c.n_head << "/" << c.n_head_kv;
    }
  }
}

// The f16 cache is written with F16C where the CPU has it: the same halves as f32_to_f16, ties,
// subnormals, overflow to inf and signed zeros included.
// The split states a decode keeps between calls are what attention_kept_bytes announces (the CPU
// backend's footprint scratch): the same bytes after the worst call (a whole block of rows at the
// last position), never more after any other, on a fresh thread (the buffer is the caller's).
TEST_F(CpuAttention, KeptSplitStatesAreTheAnnouncedBytes) {
  for (const Case& shape : {Case{32, 8, 64, 0.0f, 0, {}}, Case{128, 1, 576, 0.0f, 0, {}},
                            Case{4, 4, 64, 0.0f, 0, {}}}) {
    const int64_t keys = 3000, group = shape.n_head / shape.n_head_kv;
    const int64_t block_rows = std::max<int64_t>(1, 64 / group);
    Case longest = shape;
    longest.pos = {static_cast<int32_t>(keys - 1)};
    const Setup s = make(longest, DType::F16);
    const uint64_t announced = cpu::attention_kept_bytes(s.args, keys, 512, 3);
    std::thread([&] {
      for (const int64_t M : {int64_t{1}, block_rows / 2 + 1, block_rows}) {
        Case c = shape;
        c.pos = run_of(static_cast<int32_t>(keys - M), static_cast<int32_t>(M));
        Setup rows = make(c, DType::F16);
        run(*cpu3_, c, rows);
        EXPECT_LE(cpu::attention_kept_now(), announced) << shape.n_head << " heads, M " << M;
      }
      EXPECT_EQ(cpu::attention_kept_now(), announced) << shape.n_head << " heads";
    }).join();
  }
}

TEST_F(CpuAttention, F16StoreMatchesScalarConversion) {
  std::vector<float> x = randn(64);
  const float specials[] = {
      1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65520.0f, 1e6f, -0.0f, 0x1p-25f,
      0x1p-24f,        3 * 0x1p-26f,        -1e-7f};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  KvView kv{DType::F16, 1, 64, 128, nullptr, nullptr};
  std::vector<uint8_t> k(128), v(128);
  kv.k = k.data();
  kv.v = v.data();
  const int32_t pos = 0;
  cpu1_->kv_store(kv, x.data(), x.data(), 1, &pos);
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, k.data() + 2 * i, 2);
    EXPECT_EQ(h, f32_to_f16(x[i])) << "value " << x[i];
  }
}

}  // namespace
}  // namespace ts
