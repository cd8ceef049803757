#include "runtime/bandwidth.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TS_TARGET(isa) __attribute__((target(isa)))
#endif

namespace ts {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Sums 64-bit words so that the loads cannot be optimised away; vector versions keep four
// independent accumulators so the loop is bound by the loads, not by the adds.
uint64_t read_sum_scalar(const uint8_t* p, uint64_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (uint64_t i = 0; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, sizeof w);
    s0 += w[0], s1 += w[1], s2 += w[2], s3 += w[3];
  }
  return s0 + s1 + s2 + s3;
}

#if defined(__x86_64__)
TS_TARGET("avx2") uint64_t read_sum_avx2(const uint8_t* p, uint64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  uint64_t w[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w), s);
  return w[0] + w[1] + w[2] + w[3];
}

TS_TARGET("avx512f") uint64_t read_sum_avx512(const uint8_t* p, uint64_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i + 256 <= n; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  uint64_t w[8];
  _mm512_storeu_si512(w, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  return w[0] + w[1] + w[2] + w[3] + w[4] + w[5] + w[6] + w[7];
}

// Independent dependency chains, more than FMA latency x issue width, so the units never wait.
// The chain loops are unrolled so that every accumulator lives in a register.
constexpr int kChains = 12;

TS_TARGET("avx2,fma") float fma_chains_avx2(int64_t iters) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
  const __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, a);
  __m256 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm256_add_ps(s, acc[k]);
  float w[8];
  _mm256_storeu_ps(w, s);
  return w[0] + w[7];
}

TS_TARGET("avx512f") float fma_chains_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, a);
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  float w[16];
  _mm512_storeu_ps(w, s);
  return w[0] + w[15];
}

// u8 x s8 products summed in groups of two into int16 (saturating, harmless here), then widened
// into int32: the AVX2 integer dot the kernels use without VNNI. The accumulator doubles as the
// signed operand, so the compiler cannot hoist the products out of the loop.
TS_TARGET("avx2") int dot_chains_avx2(int64_t iters) {
  __m256i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_epi32(k);
  const __m256i u = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k)
      acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(u, acc[k]), ones));
  __m256i t = acc[0];
  for (int k = 1; k < kChains; ++k) t = _mm256_add_epi32(t, acc[k]);
  return _mm256_extract_epi32(t, 0);
}

TS_TARGET("avx512f,avx512vl,avx512vnni") int dot_chains_vnni256(int64_t iters) {
  __m256i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_epi32(k);
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_dpbusd_epi32(acc[k], u, s);
  __m256i t = acc[0];
  for (int k = 1; k < kChains; ++k) t = _mm256_add_epi32(t, acc[k]);
  return _mm256_extract_epi32(t, 0);
}

TS_TARGET("avx512f,avx512vnni") int dot_chains_vnni512(int64_t iters) {
  __m512i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_epi32(k);
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], u, s);
  __m512i t = acc[0];
  for (int k = 1; k < kChains; ++k) t = _mm512_add_epi32(t, acc[k]);
  int w[16];
  _mm512_storeu_si512(w, t);
  return w[0] + w[15];
}
#endif

bool has(const char* feature) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (std::strcmp(feature, "avx512") == 0) return __builtin_cpu_supports("avx512f");
  if (std::strcmp(feature, "avx512vnni") == 0)
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
  if (std::strcmp(feature, "avx2") == 0)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  (void)feature;
  return false;
}

uint64_t default_buffer_bytes() {
  const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  uint64_t bytes = std::max<uint64_t>(1ull << 30, l3 > 0 ? 2 * static_cast<uint64_t>(l3) : 0);
  if (pages > 0 && page > 0)
    bytes = std::min(bytes, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4);
  return bytes & ~uint64_t{4095};
}

// Best rate over `runs` passes of `pass` on every thread at once; `work` is the amount one pass
// of all threads does (bytes or ops).
double best_rate(ThreadPool& pool, int threads, int runs, double work,
                 const std::function<void(int)>& pass) {
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    pool.parallel_for(threads, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) pass(static_cast<int>(t));
    });
    best = std::max(best, work / seconds_since(t0));
  }
  return best;
}

std::atomic<uint64_t> g_sink{0};  // keeps every result live

// Ops per second of `chain(iters)` run by every thread, where one call does iters x ops_per_iter
// ops; iters is set so that a pass lasts about 0.1 s.
template <class Fn>
double chain_rate(ThreadPool& pool, int threads, Fn chain, double ops_per_iter) {
  int64_t iters = 1 << 16;
  for (;;) {
    const auto t0 = Clock::now();
    g_sink += static_cast<uint64_t>(chain(iters));
    const double s = seconds_since(t0);
    if (s > 0.02) {
      iters = static_cast<int64_t>(static_cast<double>(iters) * 0.1 / s) + 1;
      break;
    }
    iters *= 4;
  }
  const double work = static_cast<double>(iters) * ops_per_iter * threads;
  return best_rate(pool, threads, 5, work,
                   [&](int) { g_sink += static_cast<uint64_t>(chain(iters)); });
}

}  // namespace

ReadBandwidth measure_read_bandwidth(int threads, uint64_t buffer_bytes, int runs) {
  threads = std::max(threads, 1);
  runs = std::max(runs, 1);
  if (buffer_bytes == 0) buffer_bytes = default_buffer_bytes();
  // Slices of whole 4 KiB pages, so every thread reads aligned vectors.
  const uint64_t slice = buffer_bytes / static_cast<uint64_t>(threads) & ~uint64_t{4095};
  buffer_bytes = slice * static_cast<uint64_t>(threads);
  void* mem =
      ::mmap(nullptr, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    fail(ErrorKind::Runtime,
         "bandwidth: cannot map a " + std::to_string(buffer_bytes >> 20) + " MiB buffer");
  auto* buf = static_cast<uint8_t*>(mem);
  uint64_t (*sum)(const uint8_t*, uint64_t) = read_sum_scalar;
#if defined(__x86_64__)
  if (has("avx512"))
    sum = read_sum_avx512;
  else if (has("avx2"))
    sum = read_sum_avx2;
#endif
  ThreadPool pool(threads);
  // Each thread first writes its own slice, so the pages are present (and local to it) before
  // anything is timed.
  pool.parallel_for(threads, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      std::memset(buf + static_cast<uint64_t>(t) * slice, static_cast<int>(t + 1), slice);
  });
  ReadBandwidth r;
  r.buffer_bytes = buffer_bytes;
  r.threads = threads;
  r.runs = runs;
  r.bytes_per_s = best_rate(pool, threads, runs, static_cast<double>(buffer_bytes), [&](int t) {
    g_sink += sum(buf + static_cast<uint64_t>(t) * slice, slice);
  });
  ::munmap(mem, buffer_bytes);
  return r;
}

ComputePeak measure_compute_peak(int threads) {
  ComputePeak p;
  p.threads = std::max(threads, 1);
  ThreadPool pool(p.threads);
#if defined(__x86_64__)
  if (has("avx512")) {
    p.f32_isa = "avx512 fma";
    p.f32_flops = chain_rate(pool, p.threads, fma_chains_avx512, kChains * 16.0 * 2);
  } else if (has("avx2")) {
    p.f32_isa = "avx2 fma";
    p.f32_flops = chain_rate(pool, p.threads, fma_chains_avx2, kChains * 8.0 * 2);
  }
  if (has("avx512vnni")) {
    p.int8_isa = "avx512 vnni";
    p.int8_ops = chain_rate(pool, p.threads, dot_chains_vnni512, kChains * 64.0 * 2);
    p.int8_ops_256 = chain_rate(pool, p.threads, dot_chains_vnni256, kChains * 32.0 * 2);
  } else if (has("avx2")) {
    p.int8_isa = "avx2 maddubs";
    p.int8_ops = chain_rate(pool, p.threads, dot_chains_avx2, kChains * 32.0 * 2);
    p.int8_ops_256 = p.int8_ops;
  }
#endif
  if (p.f32_flops == 0)
    fail(ErrorKind::Unsupported, "compute peak: no AVX2/AVX-512 on this CPU to measure");
  return p;
}

void reprobe_compute_peak(ComputePeak& peak) {
  const ComputePeak after = measure_compute_peak(peak.threads);
  peak.f32_flops = std::max(peak.f32_flops, after.f32_flops);
  peak.int8_ops = std::max(peak.int8_ops, after.int8_ops);
  peak.int8_ops_256 = std::max(peak.int8_ops_256, after.int8_ops_256);
}

}  // namespace ts
