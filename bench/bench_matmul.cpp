// CPU matmul kernels per weight type, at the decode shape (M = 1) and at prefill shapes
// (M = 8 and 16, an expert's share of a micro-batch; 64 to 512), next to a streaming-read benchmark
// that measures the memory bandwidth they are held against. Counters: weight_GB/s (weight bytes
// streamed per second) and GFLOP/s (2 M N K).
//
// decode/ cycles through enough copies of a 4096 x 4096 weight (>= 512 MiB) that it streams from
// DRAM, not from the last-level cache; decode_cached/ reuses one 256 x 4096 weight, resident in
// L2 / L3, to show what the kernel itself can do. threads:2 splits the weight rows between two
// threads, as the backend does. The avx512-panels/ runs take q8_0 and q4_k to q6_k weights packed
// into the panel layout the CPU backend loads them in where AVX512-VNNI is available
// (panel_layout.h).
//
//   build-*/bench/bench_matmul --benchmark_filter='decode'  [TURBOSPARK_ISA=avx2]
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/panel_layout.h"
#include "quant/dequant.h"
#include "quant/dtype.h"

namespace ts::cpu {
namespace {

constexpr int64_t kRows = 4096;
constexpr int64_t kCols = 4096;
constexpr uint64_t kDecodeBytes = 512ull << 20;

const DType kTypes[] = {DType::F32,     DType::F16,    DType::BF16,  DType::Q4_0,    DType::Q4_1,
                        DType::Q5_0,    DType::Q5_1,   DType::Q8_0,  DType::Q2_K,    DType::Q3_K,
                        DType::Q4_K,    DType::Q5_K,   DType::Q6_K,  DType::IQ4_NL,  DType::IQ4_XS,
                        DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,
                        DType::IQ1_S,   DType::IQ1_M,  DType::TQ1_0, DType::TQ2_0,   DType::MXFP4};

uint64_t next_random(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Byte offsets of the f16 scale fields (d, and dmin / m) in a block, as in quant/blocks.h.
std::vector<int> scale_fields(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return {0, 2};
    case DType::Q2_K:
      return {80, 82};
    case DType::Q3_K:
      return {108};
    case DType::Q6_K:
      return {208};
    case DType::TQ1_0:
      return {52};
    case DType::TQ2_0:
      return {64};
    case DType::IQ1_M:
    case DType::MXFP4:
      return {};  // f16 scale: the top nibbles of four u16; mxfp4: an e8m0 byte (random_weight)
    default:
      return {0};
  }
}

// Bytes at a 64-byte boundary, as the backend allocates weights: a 64-byte load from a packed
// panel then never straddles two cache lines.
struct AlignedBytes {
  explicit AlignedBytes(const std::vector<uint8_t>& from)
      : p(static_cast<uint8_t*>(std::aligned_alloc(64, (from.size() + 63) / 64 * 64)), &std::free) {
    std::memcpy(p.get(), from.data(), from.size());
  }
  uint8_t* data() const { return p.get(); }
  std::unique_ptr<uint8_t, decltype(&std::free)> p;
};

// Random weights: small random floats for the float types, random quant bytes with small f16
// scales for the others (random f16 bits would give NaN and inf scales).
std::vector<uint8_t> random_weight(DType t, int64_t rows, uint64_t seed) {
  const uint64_t row_bytes = ts::row_bytes(t, kCols, "bench weight");
  std::vector<uint8_t> bytes(row_bytes * rows);
  uint64_t s = seed | 1;
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    const uint64_t v = next_random(s);
    std::memcpy(&bytes[i], &v, 8);
  }
  const auto small = [](uint8_t b) { return (static_cast<float>(b) - 127.5f) / 1024.0f; };
  if (t == DType::F32) {
    for (size_t i = 0; i < bytes.size(); i += 4) {
      const float v = small(bytes[i]);
      std::memcpy(&bytes[i], &v, 4);
    }
  } else if (t == DType::F16 || t == DType::BF16) {
    for (size_t i = 0; i < bytes.size(); i += 2) {
      const uint16_t h =
          t == DType::F16 ? f32_to_f16(small(bytes[i])) : f32_to_bf16(small(bytes[i]));
      std::memcpy(&bytes[i], &h, 2);
    }
  } else {
    const uint32_t block_bytes = dtype_info(t).block_bytes;
    for (size_t b = 0; b + block_bytes <= bytes.size(); b += block_bytes)
      for (int field : scale_fields(t)) {
        const uint16_t h = f32_to_f16(small(bytes[b + field]) / 16.0f);
        std::memcpy(&bytes[b + field], &h, 2);
      }
    // iq1_m: d = 2^-8 (0x1C00), nibble i of it in the top nibble of the u16 at 48 + 2 i.
    for (size_t b = 0; t == DType::IQ1_M && b + block_bytes <= bytes.size(); b += block_bytes)
      for (int i = 0; i < 4; ++i)
        bytes[b + 49 + 2 * i] = static_cast<uint8_t>((bytes[b + 49 + 2 * i] & 0x0F) |
                                                     (((0x1C00 >> (4 * i)) & 0xF) << 4));
    // mxfp4: e8m0 exponents 2^-8 .. 2^-1.
    for (size_t b = 0; t == DType::MXFP4 && b + block_bytes <= bytes.size(); b += block_bytes)
      bytes[b] = static_cast<uint8_t>(119 + bytes[b] % 8);
  }
  return bytes;
}

// A second thread that runs one job per call of run(). It blocks between jobs (futex-backed
// atomic wait) rather than spinning: on a shared, oversubscribed machine a spinning waiter that
// loses its core stalls the other thread for a whole scheduler quantum.
class Helper {
 public:
  Helper() : thread_([this] { loop(); }) {}
  ~Helper() {
    stop_.store(true);
    generation_.fetch_add(1);
    generation_.notify_one();
    thread_.join();
  }
  void run(const std::function<void()>& job, const std::function<void()>& own) {
    job_ = &job;
    done_.store(false);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_one();
    own();
    done_.wait(false, std::memory_order_acquire);
  }

 private:
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      generation_.wait(seen, std::memory_order_acquire);
      seen = generation_.load();
      if (stop_.load()) return;
      (*job_)();
      done_.store(true, std::memory_order_release);
      done_.notify_one();
    }
  }
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> done_{false};
  std::atomic<bool> stop_{false};
  const std::function<void()>* job_ = nullptr;
  std::thread thread_;
};

// `streamed`: cycle through copies of the weight so that every iteration reads it from DRAM.
// `panels`: the weight packed into the panel layout.
void run_matmul(benchmark::State& state, DType t, Isa isa, int64_t M, int64_t rows, bool streamed,
                int threads, bool panels = false) {
  if (!isa_available(isa)) {
    state.SkipWithError((std::string(isa_name(isa)) + " not available on this CPU").c_str());
    return;
  }
  if (panels && !panel_kernels_active()) {
    state.SkipWithError("no AVX512-VNNI on the active path: no panel layout");
    return;
  }
  const uint64_t weight_bytes = ts::row_bytes(t, kCols, "bench") * rows;
  const int copies =
      streamed ? static_cast<int>((kDecodeBytes + weight_bytes - 1) / weight_bytes) : 1;
  std::vector<AlignedBytes> weights;
  for (int c = 0; c < copies; ++c) {
    weights.emplace_back(random_weight(t, rows, 0x9E3779B97F4A7C15ull + c));
    if (panels)
      pack_panels(t, weights.back().data(), rows, kCols, weight_bytes / rows, 0, rows / kPanelRows);
  }
  std::vector<float> x(M * kCols);
  uint64_t s = 7;
  for (auto& v : x) v = static_cast<float>(next_random(s) % 2001) / 1000.0f - 1.0f;
  std::vector<float> y(M * rows);
  PackedActs packed;
  std::unique_ptr<Helper> helper;
  if (threads == 2) helper = std::make_unique<Helper>();

  int c = 0;
  for (auto _ : state) {
    const WeightView w{
        t,     weights[c].data(),   rows,
        kCols, weight_bytes / rows, panels ? WeightLayout::Panels : WeightLayout::Rows};
    c = (c + 1) % copies;
    pack_activations(t, x.data(), M, kCols, packed);
    if (threads == 2) {
      const std::function<void()> half = [&] {
        matmul_rows_isa(isa, w, packed, rows / 2, rows, y.data(), rows);
      };
      helper->run(half, [&] { matmul_rows_isa(isa, w, packed, 0, rows / 2, y.data(), rows); });
    } else {
      matmul_rows_isa(isa, w, packed, 0, rows, y.data(), rows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["weight_GB/s"] =
      benchmark::Counter(iters * weight_bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(iters * 2.0 * M * rows * kCols / 1e9, benchmark::Counter::kIsRate);
}

// Sums a large buffer with 64-bit loads: the read bandwidth one (or two) cores can draw.
void stream_read(benchmark::State& state, int threads) {
  const size_t bytes = kDecodeBytes;
  std::vector<uint64_t> buf(bytes / 8);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
  const auto sum_range = [&](size_t b, size_t e) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = b; i < e; i += 4)
      s0 += buf[i], s1 += buf[i + 1], s2 += buf[i + 2], s3 += buf[i + 3];
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
  };
  std::unique_ptr<Helper> helper;
  if (threads == 2) helper = std::make_unique<Helper>();
  for (auto _ : state) {
    if (threads == 2) {
      const std::function<void()> half = [&] { sum_range(buf.size() / 2, buf.size()); };
      helper->run(half, [&] { sum_range(0, buf.size() / 2); });
    } else {
      sum_range(0, buf.size());
    }
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * bytes / 1e9,
                                              benchmark::Counter::kIsRate);
}

// Single-threaded runs are timed in CPU time, which a shared machine's other processes disturb
// far less than wall time (stalls on memory still count); two-thread runs in wall time.
benchmark::internal::Benchmark* timed(benchmark::internal::Benchmark* b, int threads,
                                      benchmark::TimeUnit unit) {
  b->Unit(unit);
  return threads == 2 ? b->UseRealTime() : b;
}

void register_all() {
  for (int threads : {1, 2})
    timed(
        benchmark::RegisterBenchmark(("memory_read/threads:" + std::to_string(threads)).c_str(),
                                     [threads](benchmark::State& st) { stream_read(st, threads); }),
        threads, benchmark::kMillisecond);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::Q5_0, DType::Q4_1, DType::Q5_1,
                  DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::MXFP4}) {
    const std::string type = dtype_name(t);
    for (int threads : {1, 2})
      timed(benchmark::RegisterBenchmark(
                ("decode/" + type + "/avx512-panels/threads:" + std::to_string(threads)).c_str(),
                [=](benchmark::State& st) {
                  run_matmul(st, t, Isa::Avx512, 1, kRows, true, threads, true);
                }),
            threads, benchmark::kMicrosecond);
    timed(benchmark::RegisterBenchmark(("decode_cached/" + type + "/avx512-panels").c_str(),
                                       [=](benchmark::State& st) {
                                         run_matmul(st, t, Isa::Avx512, 1, 256, false, 1, true);
                                       }),
          1, benchmark::kMicrosecond);
    for (int64_t M : {8, 64, 128, 512})
      timed(benchmark::RegisterBenchmark(
                ("prefill/" + type + "/avx512-panels/M:" + std::to_string(M)).c_str(),
                [=](benchmark::State& st) {
                  run_matmul(st, t, Isa::Avx512, M, kRows, false, 1, true);
                }),
            1, benchmark::kMillisecond);
  }
  for (DType t : kTypes) {
    const std::string type = dtype_name(t);
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
      for (int threads : {1, 2}) {
        const std::string name =
            "decode/" + type + "/" + isa_name(isa) + "/threads:" + std::to_string(threads);
        timed(benchmark::RegisterBenchmark(
                  name.c_str(),
                  [=](benchmark::State& st) { run_matmul(st, t, isa, 1, kRows, true, threads); }),
              threads, benchmark::kMicrosecond);
      }
    for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
      const std::string name = "decode_cached/" + type + "/" + isa_name(isa);
      timed(benchmark::RegisterBenchmark(
                name.c_str(),
                [=](benchmark::State& st) { run_matmul(st, t, isa, 1, 256, false, 1); }),
            1, benchmark::kMicrosecond);
    }
    for (int64_t M : {8, 16, 64, 128, 512})
      for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
        const std::string name =
            "prefill/" + type + "/" + isa_name(isa) + "/M:" + std::to_string(M);
        timed(benchmark::RegisterBenchmark(
                  name.c_str(),
                  [=](benchmark::State& st) { run_matmul(st, t, isa, M, kRows, false, 1); }),
              1, benchmark::kMillisecond);
      }
  }
}

}  // namespace
}  // namespace ts::cpu

int main(int argc, char** argv) {
  ts::cpu::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
