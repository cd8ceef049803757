// CPU Gated DeltaNet: the delta rule of one layer at Qwen3.5-35B-A3B's / Qwen3.6-35B-A3B's shape
// (16 key heads, 32 value heads, 128 x 128 state per value head), for one decode row and for a
// prefill micro-batch, on one and two threads. 30 layers' states are cycled (63 MiB, past any
// last-level cache), as a decode step meets them. Counter State_GB/s: the state bytes a row reads
// and writes back per second, against memory_read's rate in bench_matmul (a decode row's bound).
//
//   build/bench/bench_delta_net --benchmark_filter=decode
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace ts {
namespace {

constexpr int64_t kKeyHeads = 16, kValueHeads = 32, kHeadDim = 128, kLayers = 30;

uint64_t next_random(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

std::vector<float> random_values(size_t n, float scale, uint64_t seed) {
  std::vector<float> v(n);
  for (float& x : v) x = scale * (static_cast<float>(next_random(seed) % 2001) / 1000.0f - 1.0f);
  return v;
}

void delta_rule(benchmark::State& st, int64_t rows, int threads) {
  auto backend = make_cpu_backend(threads);
  const int64_t key_dim = kKeyHeads * kHeadDim, width = 2 * key_dim + kValueHeads * kHeadDim;
  const size_t state_floats = static_cast<size_t>(kValueHeads * kHeadDim * kHeadDim);
  const std::vector<float> qkv = random_values(static_cast<size_t>(rows * width), 1.0f, 1);
  const std::vector<float> beta = random_values(static_cast<size_t>(rows * kValueHeads), 2.0f, 2);
  const std::vector<float> alpha = random_values(static_cast<size_t>(rows * kValueHeads), 2.0f, 3);
  const std::vector<float> a = random_values(kValueHeads, 1.0f, 4),
                           dt = random_values(kValueHeads, 1.0f, 5);
  std::vector<float> a_neg(a.size());
  for (size_t i = 0; i < a.size(); ++i) a_neg[i] = -0.5f - 0.5f * a[i] * a[i];  // -exp(A_log) < 0
  std::vector<std::vector<float>> states(kLayers, std::vector<float>(state_floats, 0.0f));
  std::vector<float> out(static_cast<size_t>(rows * kValueHeads * kHeadDim));
  const DeltaRuleArgs args{kKeyHeads, kValueHeads,  kHeadDim, kHeadDim,
                           true,      a_neg.data(), dt.data()};
  size_t layer = 0;
  for (auto _ : st) {
    backend->delta_rule(qkv.data(), beta.data(), alpha.data(), rows, args, states[layer].data(),
                        out.data());
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % states.size();
  }
  // Each row's pass reads and writes the whole state (the chunk's later rows from cache).
  const double bytes = 2.0 * static_cast<double>(state_floats * sizeof(float));
  st.counters["State_GB/s"] = benchmark::Counter(bytes * static_cast<double>(st.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
  st.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(rows * st.iterations()), benchmark::Counter::kIsRate);
}

void register_all() {
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark(("decode/t" + std::to_string(threads)).c_str(),
                                 [threads](benchmark::State& st) { delta_rule(st, 1, threads); })
        ->UseRealTime();
    benchmark::RegisterBenchmark(("prefill64/t" + std::to_string(threads)).c_str(),
                                 [threads](benchmark::State& st) { delta_rule(st, 64, threads); })
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace ts

int main(int argc, char** argv) {
  ts::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
