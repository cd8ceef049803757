// Tensor parallelism over ranks as threads (each its own CPU backend, the thread communicator):
// a dense FFN block (gate / up by rows, down by the same columns) and an attention block (q, k, v
// by heads, the output projection by the same heads' columns), each followed by one all-reduce,
// against the unsplit block. The sums are taken in another order, so the tolerance is relative,
// not bit-identity: 1e-5 of the output's largest magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backend/backend.h"
#include "parallel/tensor_split.h"
#include "parallel/thread_communicator.h"
#include "quant/quantize.h"

namespace ts {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// A weight of `rows` x `cols` in `dtype` (f32, or quantised from random values), row layout.
struct TestMatrix {
  TestMatrix(DType t, int64_t r, int64_t c, uint32_t seed) : dtype(t), rows(r), cols(c) {
    const std::vector<float> f =
        randn(static_cast<size_t>(r * c), seed, 1.0f / std::sqrt(float(c)));
    stride = static_cast<size_t>(row_bytes(t, static_cast<uint64_t>(c), "test weight"));
    bytes.resize(stride * static_cast<size_t>(r));
    for (int64_t i = 0; i < r; ++i)
      quantize_row_weights(t, f.data() + i * c, bytes.data() + static_cast<size_t>(i) * stride, c);
  }
  HostMatrix host() const { return {dtype, rows, cols, stride, bytes.data()}; }
  DType dtype;
  int64_t rows, cols;
  size_t stride = 0;
  std::vector<uint8_t> bytes;
};

// Bytes a backend multiplies by (held here: a host backend reads weights where they are).
struct Shard {
  Shard(Backend& b, DType t, int64_t rows, int64_t cols, std::vector<uint8_t> data)
      : bytes(std::move(data)) {
    w = b.upload_weight(t, rows, cols, bytes.size() / static_cast<size_t>(rows), bytes.data());
  }
  std::vector<uint8_t> bytes;
  Weight w;
};

double max_rel(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - double(want[i])));
    ref = std::max(ref, std::fabs(double(want[i])));
  }
  return err / ref;
}

// Dense FFN: out = down(silu(gate(x)) * up(x)).
std::vector<float> ffn(Backend& b, const HostMatrix& gate_up, const HostMatrix& down, int64_t ff,
                       const std::vector<float>& x, int64_t M) {
  Shard gu(b, gate_up.dtype, gate_up.rows, gate_up.cols, take_rows(gate_up, {{0, gate_up.rows}}));
  Shard dn(b, down.dtype, down.rows, down.cols, take_rows(down, {{0, down.rows}}));
  std::vector<float> g(static_cast<size_t>(M * 2 * ff)), act(static_cast<size_t>(M * ff));
  std::vector<float> out(static_cast<size_t>(M * down.rows));
  b.matmul(gu.w, x.data(), M, g.data());
  b.glu(Glu::SiLU, g.data(), g.data() + ff, M, ff, 2 * ff, act.data());
  b.matmul(dn.w, act.data(), M, out.data());
  return out;
}

void check_ffn(DType t, int ranks) {
  const int64_t d = 64, ff = 256, M = 5;
  const TestMatrix gate_up(t, 2 * ff, d, 1), down(t, d, ff, 2);
  const std::vector<float> x = randn(static_cast<size_t>(M * d), 3, 1.0f);
  auto cpu = make_cpu_backend(1);
  const std::vector<float> want = ffn(*cpu, gate_up.host(), down.host(), ff, x, M);
  const TensorPlan plan = plan_tensor_parallel({.n_head = 0,
                                                .n_head_kv = 0,
                                                .head_dim = 0,
                                                .n_ff = ff,
                                                .block_elems = dtype_info(t).block_elems},
                                               ranks, KvHeadPolicy::Refuse);
  std::vector<std::vector<float>> got(static_cast<size_t>(ranks));
  run_ranks(make_thread_communicators(ranks), [&](Communicator& comm) {
    const RankSlice& s = plan.slice[static_cast<size_t>(comm.rank())];
    auto b = make_cpu_backend(1);
    const std::vector<uint8_t> gu = take_rows(gate_up.host(), gate_up_rows(s, ff));
    const std::vector<uint8_t> dn = take_columns(down.host(), s.ff0, s.ffs);
    const HostMatrix gu_shard{t, 2 * s.ffs, d, gate_up.stride, gu.data()};
    const HostMatrix dn_shard{t, d, s.ffs, dn.size() / static_cast<size_t>(d), dn.data()};
    std::vector<float> y = ffn(*b, gu_shard, dn_shard, s.ffs, x, M);
    comm.all_reduce_sum(y.data(), static_cast<int64_t>(y.size()));
    got[static_cast<size_t>(comm.rank())] = std::move(y);
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_LE(max_rel(got[static_cast<size_t>(r)], want), 1e-5)
        << dtype_name(t) << ", " << ranks << " ranks, rank " << r;
    EXPECT_EQ(got[static_cast<size_t>(r)], got[0]) << "the ranks' sums differ";
  }
}

TEST(TensorParallel, DenseFfnMatchesTheUnsplitBlock) {
  for (DType t : {DType::F32, DType::Q8_0})
    for (int ranks : {2, 4}) check_ffn(t, ranks);
}

// Causal attention of M rows (a prompt from position 0): q, k, v projected, rotated, stored,
// attended, projected out by wo. n_head / n_kv heads of head_dim.
struct AttentionBlock {
  int64_t n_head, n_kv, hd;
};

std::vector<float> attention(Backend& b, const AttentionBlock& a, const HostMatrix& wqkv,
                             const HostMatrix& wo, const std::vector<float>& x, int64_t M) {
  const int64_t q_rows = a.n_head * a.hd, kv_rows = a.n_kv * a.hd, d = wo.rows;
  Shard wq(b, wqkv.dtype, q_rows, wqkv.cols, take_rows(wqkv, {{0, q_rows}}));
  Shard wk(b, wqkv.dtype, kv_rows, wqkv.cols, take_rows(wqkv, {{q_rows, kv_rows}}));
  Shard wv(b, wqkv.dtype, kv_rows, wqkv.cols, take_rows(wqkv, {{q_rows + kv_rows, kv_rows}}));
  Shard o(b, wo.dtype, wo.rows, wo.cols, take_rows(wo, {{0, wo.rows}}));
  std::vector<float> q(static_cast<size_t>(M * q_rows)), k(static_cast<size_t>(M * kv_rows)),
      v(k.size()), att(q.size()), out(static_cast<size_t>(M * d));
  std::vector<int32_t> pos(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) pos[static_cast<size_t>(m)] = static_cast<int32_t>(m);
  std::vector<float> inv_freq(static_cast<size_t>(a.hd / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(a.hd));
  const RopeArgs rope{
      .head_dim = a.hd, .rotary_dim = a.hd, .neox = true, .inv_freq = inv_freq.data()};
  std::vector<float> kc(static_cast<size_t>(M * kv_rows)), vc(kc.size());
  const KvView kv{.dtype = DType::F32,
                  .capacity = M,
                  .width = kv_rows,
                  .row_bytes = static_cast<size_t>(kv_rows) * sizeof(float),
                  .k = kc.data(),
                  .v = vc.data()};
  b.matmul(wq.w, x.data(), M, q.data());
  b.matmul(wk.w, x.data(), M, k.data());
  b.matmul(wv.w, x.data(), M, v.data());
  b.rope(q.data(), M, a.n_head, pos.data(), rope);
  b.rope(k.data(), M, a.n_kv, pos.data(), rope);
  b.kv_store(kv, k.data(), v.data(), M, pos.data());
  const AttentionArgs args{.n_head = a.n_head,
                           .n_head_kv = a.n_kv,
                           .head_dim = a.hd,
                           .scale = 1.0f / std::sqrt(static_cast<float>(a.hd))};
  b.attention(q.data(), kv, M, pos.data(), args, att.data());
  b.matmul(o.w, att.data(), M, out.data());
  return out;
}

void check_attention(DType t, const AttentionBlock& a, int ranks) {
  const int64_t d = 64, M = 9;
  const TestMatrix wqkv(t, (a.n_head + 2 * a.n_kv) * a.hd, d, 4), wo(t, d, a.n_head * a.hd, 5);
  const std::vector<float> x = randn(static_cast<size_t>(M * d), 6, 1.0f);
  auto cpu = make_cpu_backend(1);
  const std::vector<float> want = attention(*cpu, a, wqkv.host(), wo.host(), x, M);
  const TensorPlan plan = plan_tensor_parallel({.n_head = a.n_head,
                                                .n_head_kv = a.n_kv,
                                                .head_dim = a.hd,
                                                .n_ff = 0,
                                                .block_elems = dtype_info(t).block_elems},
                                               ranks, KvHeadPolicy::Replicate);
  std::vector<std::vector<float>> got(static_cast<size_t>(ranks));
  run_ranks(make_thread_communicators(ranks), [&](Communicator& comm) {
    const RankSlice& s = plan.slice[static_cast<size_t>(comm.rank())];
    auto b = make_cpu_backend(1);
    const std::vector<uint8_t> qkv = take_rows(wqkv.host(), qkv_rows(s, a.n_head, a.n_kv, a.hd));
    const std::vector<uint8_t> o = take_columns(wo.host(), s.head0 * a.hd, s.heads * a.hd);
    const HostMatrix qkv_shard{t, (s.heads + 2 * s.kv_heads) * a.hd, d, wqkv.stride, qkv.data()};
    const HostMatrix o_shard{t, d, s.heads * a.hd, o.size() / static_cast<size_t>(d), o.data()};
    std::vector<float> y = attention(*b, {s.heads, s.kv_heads, a.hd}, qkv_shard, o_shard, x, M);
    comm.all_reduce_sum(y.data(), static_cast<int64_t>(y.size()));
    got[static_cast<size_t>(comm.rank())] = std::move(y);
  });
  for (int r = 0; r < ranks; ++r)
    EXPECT_LE(max_rel(got[static_cast<size_t>(r)], want), 1e-5)
        << dtype_name(t) << ", " << a.n_head << "/" << a.n_kv << " heads, " << ranks
        << " ranks, rank " << r;
}

TEST(TensorParallel, AttentionMatchesTheUnsplitBlock) {
  for (DType t : {DType::F32, DType::Q8_0}) {
    check_attention(t, {8, 4, 16}, 2);  // 2 kv heads a rank
    check_attention(t, {8, 2, 16}, 2);  // grouped: 4 q heads over 1 kv head a rank
    check_attention(t, {8, 2, 16}, 4);  // kv heads replicated: each held by 2 ranks
  }
}

}  // namespace
}  // namespace ts
