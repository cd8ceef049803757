// CPU decode attention: one query row over a KV cache of `context` keys, at the head shapes of
// Llama-3.2-1B (32 query heads over 8 kv heads of 64), Llama-3-8B (32 over 8 of 128) and MLA's
// (DeepSeek-V3: 128 over one of 576, its K and V rows stored apart here), f16, bf16 and q8_0
// caches, on one and two threads. Counter KV_GB/s: the cache bytes one decode step reads (its K and
// V rows of every kv head) per second, against memory_read's rate in bench_matmul. Several layers'
// caches are cycled so that a long context reads from DRAM, as a decode step does.
//
//   build/bench/bench_attention --benchmark_filter='decode/f16/llama3.2-1b'
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "core/thread_pool.h"
#include "quant/dtype.h"

namespace ts::cpu {
namespace {

struct HeadShape {
  const char* name;
  int64_t n_head, n_head_kv, head_dim;
};

// GQA groups of 4 (Llama 3), 3 (SmolLM2) and 2 (Gemma 2 2B): the decode block of one row takes
// 4, 3 or 2 query vectors.
constexpr HeadShape kShapes[] = {{"llama3.2-1b", 32, 8, 64},
                                 {"llama3-8b", 32, 8, 128},
                                 {"smollm2-135m", 9, 3, 64},
                                 {"gemma2-2b", 8, 4, 256},
                                 {"deepseek-v3-mla", 128, 1, 576}};
constexpr uint64_t kCycledBytes = 256ull << 20;  // past any last-level cache

uint64_t next_random(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

float random_unit(uint64_t& s) {
  return static_cast<float>(next_random(s) % 2001) / 1000.0f - 1.0f;
}

// One benchmark: the cache type, the heads, the keys before the query, the threads.
struct Case {
  DType dtype;
  HeadShape h;
  int64_t context;
  int threads;
  int64_t width() const { return h.n_head_kv * h.head_dim; }
  uint64_t row_bytes() const { return ts::row_bytes(dtype, width(), "bench cache"); }
};

// One layer's cache of c.context rows, filled with values in [-1, 1] through the cache's own store.
struct Cache {
  Cache(const Case& c, uint64_t seed)
      : k(c.row_bytes() * static_cast<size_t>(c.context)), v(k.size()) {
    std::vector<float> row(static_cast<size_t>(c.width()));
    for (int64_t j = 0; j < c.context; ++j) {
      for (float& x : row) x = random_unit(seed);
      store_kv_row(c.dtype, row.data(), c.width(), k.data() + j * c.row_bytes());
      for (float& x : row) x = random_unit(seed);
      store_kv_row(c.dtype, row.data(), c.width(), v.data() + j * c.row_bytes());
    }
  }
  std::vector<uint8_t> k, v;
};

void decode(benchmark::State& state, const Case& c) {
  const HeadShape& h = c.h;
  const uint64_t bytes = 2 * c.row_bytes() * c.context;
  const auto layers = static_cast<int>(std::max<uint64_t>(1, kCycledBytes / bytes));
  std::vector<Cache> caches;
  caches.reserve(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) caches.emplace_back(c, 0x9E37ull + l);
  std::vector<float> q(static_cast<size_t>(h.n_head * h.head_dim));
  uint64_t s = 11;
  for (float& x : q) x = random_unit(s);
  std::vector<float> out(q.size());
  const auto pos = static_cast<int32_t>(c.context - 1);
  const AttentionArgs args{
      h.n_head, h.n_head_kv, h.head_dim, 1.0f / std::sqrt(static_cast<float>(h.head_dim)), 0.0f, 0};
  ThreadPool pool(c.threads);
  int l = 0;
  for (auto _ : state) {
    Cache& layer = caches[static_cast<size_t>(l)];
    l = (l + 1) % layers;
    const KvView kv{c.dtype, c.context, c.width(), c.row_bytes(), layer.k.data(), layer.v.data()};
    attention(pool, q.data(), kv, 1, &pos, args, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["KV_GB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(bytes) / 1e9,
                         benchmark::Counter::kIsRate);
}

void register_all() {
  for (DType dtype : {DType::F16, DType::BF16, DType::Q8_0})
    for (const HeadShape& h : kShapes)
      for (int64_t context : {512, 4096, 16384})
        for (int threads : {1, 2}) {
          const std::string name = std::string("decode/") + dtype_name(dtype) + "/" + h.name +
                                   "/context:" + std::to_string(context) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& st) {
                                         decode(st, Case{dtype, h, context, threads});
                                       })
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
}

}  // namespace
}  // namespace ts::cpu

int main(int argc, char** argv) {
  ts::cpu::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
