// CUDA matmul throughput through the backend, next to the ceilings it is held against:
// * device-to-device copy bandwidth (cudaMemcpy, bytes read + written per second);
// * decode GEMV (M = 1) per weight type: weight bytes streamed per second, and that as a fraction
//   of the copy bandwidth (the decode bound of issue #7), in the file's layout and, for weights
//   the backend packs at open (q8_0, q6_k), in the packed layout ("packed");
// * batched decode (M = 1 .. cuda::kGemvRows + 1 rows of one weight): time per matmul against one
//   row's;
// * prefill GEMM (M = 512) per weight type in TFLOP/s (2 M N K), next to a large bf16 GEMM
//   (M = N = K = 8192) as the measured tensor-core rate;
// * attention, decode and prefill, per KV cache type.
//
// Every GEMV cycles through enough copies of its weight (>= 512 MiB, 8x the 60 MB L2) that the
// bytes come from HBM, not from L2. Times are wall-clock over many back-to-back calls on the
// backend's stream, between two synchronisations.
//
//   build-*/bench/bench_cuda_gemv [--quick | --attention]   (--attention: only the attention table)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifdef TURBOSPARK_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "quant/blocks.h"
#include "quant/dequant.h"
#include "quant/dtype.h"

namespace ts {
namespace {

constexpr uint64_t kStreamBytes = 512ull << 20;

uint64_t next_random(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Random bytes with every f16 scale field of every block set to a small finite value, so that no
// NaN or infinity enters the arithmetic.
std::vector<uint8_t> random_weight(DType t, int64_t rows, int64_t cols) {
  const size_t rb = row_bytes(t, static_cast<uint64_t>(cols), "bench weight");
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i + 8 <= w.size(); i += 8) {
    const uint64_t r = next_random(s);
    std::memcpy(w.data() + i, &r, 8);
  }
  const DTypeInfo& info = dtype_info(t);
  const uint16_t small = f32_to_f16(0.01f);
  if (t == DType::F16 || t == DType::BF16 || t == DType::F32) {
    // Keep the exponents sane: small values of the type.
    for (size_t i = 0; i < w.size(); i += 2) {
      const uint16_t h = t == DType::F16 ? static_cast<uint16_t>(0x2000 | (w[i] & 0x3FF))
                                         : static_cast<uint16_t>(0x3C00 | (w[i] & 0x7F));
      std::memcpy(w.data() + i, &h, 2);
    }
    return w;
  }
  std::vector<size_t> offsets;
  switch (t) {
    case DType::Q2_K:
      offsets = {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
      break;
    case DType::Q3_K:
      offsets = {offsetof(BlockQ3_K, d)};
      break;
    case DType::Q6_K:
      offsets = {offsetof(BlockQ6_K, d)};
      break;
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      offsets = {0, 2};
      break;
    default:
      offsets = {0};
      break;
  }
  for (size_t b = 0; b < w.size() / info.block_bytes; ++b)
    for (size_t off : offsets) std::memcpy(w.data() + b * info.block_bytes + off, &small, 2);
  return w;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Device-to-device copy of 1 GiB, timed with events: (read + write bytes) / time.
double copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  const int iters = 20;
  cudaEventRecord(e0);
  for (int i = 0; i < iters; ++i) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes * iters / (ms * 1e-3);
}

struct Shape {
  int64_t rows, cols;
};

// Seconds per matmul, cycling through `copies` uploads of one weight; with `pack`, each upload is
// packed by the backend as the engine packs weights at open (Backend::pack_weight).
double time_matmul(Backend& be, DType t, Shape s, int64_t M, int copies, double budget_s,
                   bool pack = false) {
  const std::vector<uint8_t> host = random_weight(t, s.rows, s.cols);
  const size_t rb = host.size() / static_cast<size_t>(s.rows);
  std::vector<Weight> ws;
  for (int c = 0; c < copies; ++c) {
    ws.push_back(be.upload_weight(t, s.rows, s.cols, rb, host.data()));
    if (pack) be.pack_weight(ws.back());
  }
  std::vector<float> xh(static_cast<size_t>(M * s.cols));
  uint64_t r = 12345;
  for (float& v : xh) v = static_cast<float>(next_random(r) % 2001) / 1000.0f - 1.0f;
  auto* x = static_cast<float*>(be.alloc(xh.size() * sizeof(float)));
  be.to_device(x, xh.data(), xh.size() * sizeof(float));
  auto* y = static_cast<float*>(be.alloc(static_cast<size_t>(M * s.rows) * sizeof(float)));
  for (int i = 0; i < 3; ++i) be.matmul(ws[static_cast<size_t>(i % copies)], x, M, y);
  be.synchronize();
  auto t0 = std::chrono::steady_clock::now();
  be.matmul(ws[0], x, M, y);
  be.synchronize();
  const double one = std::max(seconds_since(t0), 1e-6);
  const int iters = static_cast<int>(std::clamp(budget_s / one, 10.0, 5000.0));
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) be.matmul(ws[static_cast<size_t>(i % copies)], x, M, y);
  be.synchronize();
  const double per = seconds_since(t0) / iters;
  for (Weight& w : ws) be.release_weight(w);
  be.free(x);
  be.free(y);
  return per;
}

// Attention at a Llama-3-8B shape (32 heads over 8 kv heads of 128): decode over caches of 32 to
// 16384 rows (KV bytes read per second, against the copy bandwidth) and a 512-row causal prefill
// (TFLOP/s of the 4 M^2/2 hd n_head multiply-adds it does), per KV cache type.
void attention(Backend& be, double copy) {
  const int64_t n_head = 32, n_kv = 8, hd = 128, ctx = 16384, M = 512;
  const int64_t width = n_kv * hd;
  std::vector<float> host(static_cast<size_t>(ctx * width));
  uint64_t r = 777;
  for (float& v : host) v = static_cast<float>(next_random(r) % 2001) / 1000.0f - 1.0f;
  auto* kv_src = static_cast<float*>(be.alloc(host.size() * sizeof(float)));
  be.to_device(kv_src, host.data(), host.size() * sizeof(float));
  auto* q = static_cast<float*>(be.alloc(static_cast<size_t>(M * n_head * hd) * sizeof(float)));
  be.to_device(q, host.data(), static_cast<size_t>(M * n_head * hd) * sizeof(float));
  auto* out = static_cast<float*>(be.alloc(static_cast<size_t>(M * n_head * hd) * sizeof(float)));
  std::vector<int32_t> rows(static_cast<size_t>(ctx));
  for (int64_t i = 0; i < ctx; ++i) rows[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const AttentionArgs args{n_head, n_kv, hd, 0.08838834764f, 0.0f, 0};
  std::printf("\n%-6s %-28s %10s %10s %9s\n", "kv", "attention", "us", "rate", "of copy");
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    const size_t rb = row_bytes(t, static_cast<uint64_t>(width), "bench kv");
    KvView kv{t, ctx, width, rb, be.alloc(rb * ctx), be.alloc(rb * ctx)};
    be.kv_store(kv, kv_src, kv_src, ctx, rows.data());
    auto timed = [&](int64_t m, const int32_t* pos, int iters) {
      be.attention(q, kv, m, pos, args, out);
      be.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) be.attention(q, kv, m, pos, args, out);
      be.synchronize();
      return seconds_since(t0) / iters;
    };
    for (int32_t keys : {32, 512, 4096, 16384}) {
      const int32_t last = keys - 1;
      const double dec = timed(1, &last, 200);
      const double kv_bytes = 2.0 * static_cast<double>(rb) * keys;
      const std::string what = "decode, " + std::to_string(keys) + " keys";
      std::printf("%-6s %-28s %10.2f %7.1f GB/s %8.1f%%\n", dtype_name(t), what.c_str(), dec * 1e6,
                  kv_bytes / dec / 1e9, 100.0 * kv_bytes / dec / copy);
    }
    const double pre = timed(M, rows.data(), 20);
    const double flops = 4.0 * M * M / 2 * hd * n_head;
    std::printf("%-6s %-28s %10.2f %5.1f TFLOP/s\n", dtype_name(t), "prefill, 512 causal rows",
                pre * 1e6, flops / pre / 1e12);
    be.free(kv.k);
    be.free(kv.v);
  }
  be.free(kv_src);
  be.free(q);
  be.free(out);
}

// Whether Backend::pack_weight rearranges a weight of this type and shape.
bool backend_packs(Backend& be, DType t, Shape s) {
  const std::vector<uint8_t> host = random_weight(t, s.rows, s.cols);
  Weight w =
      be.upload_weight(t, s.rows, s.cols, host.size() / static_cast<size_t>(s.rows), host.data());
  be.pack_weight(w);
  const bool packed = w.layout != WeightLayout::Rows;
  be.release_weight(w);
  return packed;
}

uint64_t weight_bytes(DType t, Shape s) {
  return row_bytes(t, static_cast<uint64_t>(s.cols), "bench") * static_cast<uint64_t>(s.rows);
}

// Uploads of a weight of `bytes` to cycle through so that a GEMV's bytes come from HBM.
int copies_to_stream(uint64_t bytes) {
  return static_cast<int>(std::clamp<uint64_t>((kStreamBytes + bytes - 1) / bytes, 1, 64));
}

// Batched decode: M activation rows (a server's concurrent sequences) through one matmul, in the
// layout the engine runs (packed where the backend packs). Up to cuda::gemv_int8_max_rows rows take
// the int8 GEMV (up to 4 a launch, each reading the weights once); beyond, the GEMM. "x one row":
// time over the one-row time, so M rows at 1.0x would be M tokens for the price of one.
void batched_decode(Backend& be, bool quick) {
  const DType types[] = {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q5_0};
  const std::vector<Shape> shapes =
      quick ? std::vector<Shape>{{4096, 4096}, {14336, 4096}}
            : std::vector<Shape>{{4096, 4096}, {14336, 4096}, {4096, 14336}, {1024, 4096}};
  std::printf("\n%-6s %-13s %3s %10s %10s %10s\n", "type", "rows x cols", "M", "us", "GB/s",
              "x one row");
  for (const Shape& s : shapes)
    for (DType t : types) {
      const uint64_t bytes = weight_bytes(t, s);
      const int copies = copies_to_stream(bytes);
      const bool pack = backend_packs(be, t, s);
      double one = 0.0;
      for (int64_t M = 1; M <= cuda::kGemvRows + 1; ++M) {
        const double sec = time_matmul(be, t, s, M, copies, quick ? 0.03 : 0.1, pack);
        if (M == 1) one = sec;
        std::printf("%-6s %6lldx%-6lld %3lld %10.2f %10.1f %9.2fx\n", dtype_name(t),
                    static_cast<long long>(s.rows), static_cast<long long>(s.cols),
                    static_cast<long long>(M), sec * 1e6, bytes / sec / 1e9, sec / one);
      }
    }
}

int run(bool quick, bool attention_only) {
  if (!cuda_device_available()) {
    std::printf("bench_cuda_gemv: no CUDA device\n");
    return 0;
  }
  std::unique_ptr<Backend> be = make_cuda_backend(0);
  std::printf("device: %s\n", be->name().c_str());
  const double copy = copy_bandwidth();
  std::printf("device-to-device copy: %.1f GB/s (read + write)\n\n", copy / 1e9);
  if (attention_only) {
    attention(*be, copy);
    return 0;
  }

  const DType gemv_types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                              DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                              DType::Q4_K, DType::Q5_K, DType::Q6_K};
  const std::vector<Shape> gemv_shapes =
      quick ? std::vector<Shape>{{4096, 4096}, {4096, 14336}}
            : std::vector<Shape>{{4096, 4096}, {14336, 4096}, {4096, 14336}, {8192, 8192}};
  std::printf("%-6s %-13s %10s %10s %9s\n", "type", "rows x cols", "us", "GB/s", "of copy");
  for (const Shape& s : gemv_shapes)
    for (DType t : gemv_types) {
      const uint64_t bytes = weight_bytes(t, s);
      const int copies = copies_to_stream(bytes);
      // The file's layout, then the backend's packed one where it packs this weight ("packed").
      for (bool pack : {false, true}) {
        if (pack && !backend_packs(*be, t, s)) continue;
        const double sec = time_matmul(*be, t, s, 1, copies, quick ? 0.05 : 0.2, pack);
        std::printf("%-6s %6lldx%-6lld %10.2f %10.1f %8.1f%%%s\n", dtype_name(t),
                    static_cast<long long>(s.rows), static_cast<long long>(s.cols), sec * 1e6,
                    bytes / sec / 1e9, 100.0 * bytes / sec / copy, pack ? "  packed" : "");
      }
    }

  batched_decode(*be, quick);

  std::printf("\n%-6s %-20s %10s %10s\n", "type", "M x rows x cols", "ms", "TFLOP/s");
  const DType gemm_types[] = {DType::BF16, DType::F16,  DType::F32,
                              DType::Q8_0, DType::Q4_K, DType::Q6_K};
  const std::vector<Shape> gemm_shapes =
      quick ? std::vector<Shape>{{4096, 4096}}
            : std::vector<Shape>{{4096, 4096}, {14336, 4096}, {4096, 14336}};
  const int64_t M = 512;
  for (const Shape& s : gemm_shapes)
    for (DType t : gemm_types) {
      const double sec = time_matmul(*be, t, s, M, 1, quick ? 0.05 : 0.2);
      std::printf("%-6s %4lldx%6lldx%-6lld %10.3f %10.1f\n", dtype_name(t),
                  static_cast<long long>(M), static_cast<long long>(s.rows),
                  static_cast<long long>(s.cols), sec * 1e3,
                  2.0 * M * s.rows * s.cols / sec / 1e12);
    }
  const Shape big{8192, 8192};
  const double sec = time_matmul(*be, DType::BF16, big, 8192, 1, 0.3);
  std::printf("%-6s %4dx%6lldx%-6lld %10.3f %10.1f  (tensor-core reference)\n", "bf16", 8192,
              static_cast<long long>(big.rows), static_cast<long long>(big.cols), sec * 1e3,
              2.0 * 8192 * big.rows * big.cols / sec / 1e12);
  attention(*be, copy);
  return 0;
}

}  // namespace
}  // namespace ts

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool attention_only = argc > 1 && std::strcmp(argv[1], "--attention") == 0;
  return ts::run(quick, attention_only);
}

#else

int main() {
  std::printf("bench_cuda_gemv: built without CUDA\n");
  return 0;
}

#endif
