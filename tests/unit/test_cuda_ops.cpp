// The CUDA backend's ops on random data against the CPU backend (and, for matmuls, against a
// double-precision dot product of the reference-dequantised weights, since the CPU backend rounds
// activations to int8 for the quantised types). Skips when no CUDA device is present.
#include <gtest/gtest.h>

#ifdef TURBOSPARK_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/routing.h"
#include "core/error.h"
#include "cuda_op_test.h"
#include "fixture_models.h"
#include "quant/blocks.h"
#include "quant/dequant.h"
#include "quant/dtype.h"
#include "runtime/rope_freqs.h"

namespace ts {
namespace {

constexpr float kU = 5.96e-8f;  // f32 unit roundoff, 2^-24

struct KvPair;

class CudaOps : public test::CudaOpTest {
 protected:
  void route_case(int64_t E, bool ties);
  void fill_kv(KvPair& kv, int64_t fill);
  void store_kv(KvPair& kv, const std::vector<float>& k, const std::vector<float>& v);
  std::pair<std::vector<float>, std::vector<float>> attend_both(const std::vector<float>& q,
                                                                const KvPair& kv,
                                                                const std::vector<int32_t>& pos,
                                                                AttentionArgs args);
  // A random weight uploaded twice: in the file's layout, and packed by the backend.
  struct PackedPair {
    std::vector<uint8_t> host;
    size_t stride = 0;
    Weight rows, packed;
  };
  PackedPair upload_packed(DType t, int64_t rows, int64_t cols, size_t pad = 0);
  void release(PackedPair& p) {
    gpu_->release_weight(p.rows);
    gpu_->release_weight(p.packed);
  }
  std::vector<float> expect_packed_as_rows(const PackedPair& p, const std::vector<float>& x,
                                           int64_t M, const std::string& what);
  void expect_packed_embeds_as_rows(const PackedPair& p, const std::string& what);
};

// Offsets of the f16 scale fields (d, dmin, m) of each block format.
std::vector<size_t> scale_offsets(DType t) {
  switch (t) {
    case DType::Q4_0:
      return {offsetof(BlockQ4_0, d)};
    case DType::Q4_1:
      return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case DType::Q5_0:
      return {offsetof(BlockQ5_0, d)};
    case DType::Q5_1:
      return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case DType::Q8_0:
      return {offsetof(BlockQ8_0, d)};
    case DType::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case DType::Q4_K:
      return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::Q5_K:
      return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::Q6_K:
      return {offsetof(BlockQ6_K, d)};
    case DType::IQ4_NL:
      return {offsetof(BlockIQ4_NL, d)};
    case DType::IQ4_XS:
      return {offsetof(BlockIQ4_XS, d)};
    case DType::IQ2_XXS:
      return {offsetof(BlockIQ2_XXS, d)};
    case DType::IQ2_XS:
      return {offsetof(BlockIQ2_XS, d)};
    case DType::IQ2_S:
      return {offsetof(BlockIQ2_S, d)};
    case DType::IQ3_XXS:
      return {offsetof(BlockIQ3_XXS, d)};
    case DType::IQ3_S:
      return {offsetof(BlockIQ3_S, d)};
    case DType::IQ1_S:
      return {offsetof(BlockIQ1_S, d)};
    case DType::TQ1_0:
      return {offsetof(BlockTQ1_0, d)};
    case DType::TQ2_0:
      return {offsetof(BlockTQ2_0, d)};
    default:
      return {};  // iq1_m: its f16 scale is spread over the top nibbles (random_weight)
  }
}

// A random weight of `rows` rows, each `row_stride` bytes: random quant bits with finite scales
// of a realistic size, or N(0, 0.1) values for the plain types.
std::vector<uint8_t> random_weight(DType t, int64_t rows, int64_t cols, size_t row_stride,
                                   std::mt19937& rng) {
  const size_t rb = row_bytes(t, static_cast<uint64_t>(cols), "test weight");
  std::vector<uint8_t> w(static_cast<size_t>(rows) * row_stride);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : w) b = static_cast<uint8_t>(byte(rng));
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  const DTypeInfo& info = dtype_info(t);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.data() + r * row_stride;
    for (int64_t i = 0; i < cols; ++i) {
      const float v = normal(rng);
      if (t == DType::F32) std::memcpy(row + 4 * i, &v, 4);
      if (t == DType::F16 || t == DType::BF16) {
        const uint16_t h = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(row + 2 * i, &h, 2);
      }
    }
    for (size_t b = 0; b < rb / info.block_bytes; ++b)
      for (size_t off : scale_offsets(t)) {
        const uint16_t h = f32_to_f16(scale(rng));
        std::memcpy(row + b * info.block_bytes + off, &h, 2);
      }
    // MXFP4's e8m0 scale: 2^-10 .. 2^-2 (any byte would reach 2^127).
    std::uniform_int_distribution<int> exponent(118, 126);
    for (size_t b = 0; b < rb / info.block_bytes && t == DType::MXFP4; ++b)
      row[b * info.block_bytes + offsetof(BlockMXFP4, e)] = static_cast<uint8_t>(exponent(rng));
    for (size_t b = 0; b < rb / info.block_bytes && t == DType::IQ1_M; ++b) {
      const uint16_t h = f32_to_f16(scale(rng));
      uint8_t* sc = row + b * info.block_bytes + offsetof(BlockIQ1_M, scales);
      for (int i = 0; i < 4; ++i)
        sc[2 * i + 1] =
            static_cast<uint8_t>((sc[2 * i + 1] & 0x0F) | (((h >> (4 * i)) & 0xF) << 4));
    }
  }
  return w;
}

const DType kWeightTypes[] = {
    DType::F32,     DType::F16,    DType::BF16,   DType::Q4_0,    DType::Q4_1,   DType::Q5_0,
    DType::Q5_1,    DType::Q8_0,   DType::Q2_K,   DType::Q3_K,    DType::Q4_K,   DType::Q5_K,
    DType::Q6_K,    DType::IQ4_NL, DType::IQ4_XS, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
    DType::IQ3_XXS, DType::IQ3_S,  DType::IQ1_S,  DType::IQ1_M,   DType::TQ1_0,  DType::TQ2_0,
    DType::MXFP4};

TEST_F(CudaOps, NameSaysCuda) {
  EXPECT_NE(gpu_->name().find("cuda"), std::string::npos);
}

// Dequantisation is exact on both sides (every scale product is exact in f32, so only the final
// add rounds, identically): the embeddings must match bit for bit.
TEST_F(CudaOps, EmbedEveryWeightTypeExact) {
  for (DType t : kWeightTypes) {
    const int64_t rows = 37, cols = 512;
    const size_t stride = row_bytes(t, cols, "embed");
    const std::vector<uint8_t> host = random_weight(t, rows, cols, stride, rng_);
    const Weight wc = cpu_->upload_weight(t, rows, cols, stride, host.data());
    Weight wg = gpu_->upload_weight(t, rows, cols, stride, host.data());
    const std::vector<int32_t> ids = {0, 36, 5, 5, 17};
    const int64_t M = static_cast<int64_t>(ids.size());
    for (float scale : {1.0f, 22.627417f}) {
      std::vector<float> want(static_cast<size_t>(M * cols));
      cpu_->embed(wc, ids.data(), M, scale, want.data());
      float* out = upload(std::vector<float>(want.size()));
      gpu_->embed(wg, ids.data(), M, scale, out);
      test::expect_close(download(out, want.size()), want, 0.0f, 0.0f,
                         std::string("embed ") + dtype_name(t));
    }
    gpu_->release_weight(wg);
  }
}

TEST_F(CudaOps, EmbedRejectsOutOfRangeIds) {
  const std::vector<float> table = randn(4 * 8);
  Weight w = gpu_->upload_weight(DType::F32, 4, 8, 32, table.data());
  float* out = upload(std::vector<float>(8));
  const int32_t bad = 4;
  EXPECT_THROW(gpu_->embed(w, &bad, 1, 1.0f, out), Error);
  gpu_->release_weight(w);
}

// Sums of squares in f32 (tree order) against the CPU's double sum: a few ulps.
TEST_F(CudaOps, RmsNormAndPerHeadNorm) {
  for (bool plus_one : {false, true}) {
    const int64_t M = 5, n = 4096 + 96;
    const std::vector<float> x = randn(static_cast<size_t>(M * n), 3.0f),
                             w = randn(static_cast<size_t>(n));
    std::vector<float> want(x.size());
    cpu_->rms_norm(x.data(), w.data(), M, n, 1e-6f, plus_one, want.data());
    float* out = upload(std::vector<float>(x.size()));
    gpu_->rms_norm(upload(x), upload(w), M, n, 1e-6f, plus_one, out);
    test::expect_close(download(out, x.size()), want, 1e-6f, 1e-5f, "rms_norm");

    const int64_t heads = 6, hd = 128;
    std::vector<float> q = randn(static_cast<size_t>(M * heads * hd));
    const std::vector<float> wh = randn(static_cast<size_t>(hd));
    float* dq = upload(q);
    gpu_->rms_norm_heads(dq, upload(wh), M, heads, hd, 1e-6f, plus_one);
    cpu_->rms_norm_heads(q.data(), wh.data(), M, heads, hd, 1e-6f, plus_one);
    test::expect_close(download(dq, q.size()), q, 1e-6f, 1e-5f, "rms_norm_heads");
  }
}

// add_rms_norm is add() then rms_norm() in one pass: the same bits, on the 16-byte vector path
// (n = 4192) and the general one (n = 999).
TEST_F(CudaOps, AddRmsNormBitIdenticalToAddThenNorm) {
  for (const int64_t n : {int64_t{4096 + 96}, int64_t{999}}) {
    const int64_t M = 3;
    const std::vector<float> x = randn(static_cast<size_t>(M * n), 3.0f),
                             r = randn(static_cast<size_t>(M * n), 2.0f),
                             w = randn(static_cast<size_t>(n));
    const size_t N = x.size();
    float* x1 = upload(x);
    float* out1 = upload(std::vector<float>(N));
    gpu_->add(x1, upload(r), M * n);
    gpu_->rms_norm(x1, upload(w), M, n, 1e-6f, true, out1);
    float* x2 = upload(x);
    float* out2 = upload(std::vector<float>(N));
    gpu_->add_rms_norm(x2, upload(r), upload(w), M, n, 1e-6f, true, out2);
    const std::vector<float> sum1 = download(x1, N), sum2 = download(x2, N);
    const std::vector<float> norm1 = download(out1, N), norm2 = download(out2, N);
    for (size_t i = 0; i < N; ++i) {
      ASSERT_EQ(sum1[i], sum2[i]) << "sum " << i << " (n " << n << ")";
      ASSERT_EQ(norm1[i], norm2[i]) << "norm " << i << " (n " << n << ")";
    }
    std::vector<float> cpu_x = x, cpu_out(N);
    cpu_->add_rms_norm(cpu_x.data(), r.data(), w.data(), M, n, 1e-6f, true, cpu_out.data());
    test::expect_close(norm2, cpu_out, 1e-6f, 1e-5f, "add_rms_norm");
  }
}

struct MatmulCase {
  int64_t rows, cols, M;
  size_t pad;  // extra bytes per row (even): rows that are not 16-byte aligned
};

struct Reference {
  std::vector<double> y;     // W x in double precision from the reference dequantisation
  std::vector<double> mag;   // sum |w x|, the scale of f32 rounding errors
  std::vector<double> int8;  // sum |w| * amax(x block) / 127: twice the CPU's int8 activation error
  // sum |w_k| d_k (1/2 + 1e-4), d_k = max |x| over k's 32-element block / 127: the bound on the
  // int8 GEMV's activation error (|x_k - d_k q_k| <= d_k / 2, plus a few ulp of the f32
  // reciprocal), as in test_quant_matmul.
  std::vector<double> int8_gemv;
};

// Max |x| over the `block`-element block of each element.
std::vector<float> block_amax(const std::vector<float>& x, int64_t block) {
  std::vector<float> amax(x.size());
  for (size_t b = 0; b < x.size(); b += static_cast<size_t>(block)) {
    const size_t e = std::min(x.size(), b + static_cast<size_t>(block));
    float a = 0;
    for (size_t i = b; i < e; ++i) a = std::max(a, std::fabs(x[i]));
    std::fill(amax.begin() + static_cast<std::ptrdiff_t>(b),
              amax.begin() + static_cast<std::ptrdiff_t>(e), a);
  }
  return amax;
}

Reference reference_matmul(DType t, const std::vector<uint8_t>& w, const MatmulCase& c,
                           size_t stride, const std::vector<float>& x) {
  // The CPU packs activations per 32 elements for the 32-element types, per 256 for the k-quants.
  const std::vector<float> amax = block_amax(x, dtype_info(t).block_elems == kQKK ? kQKK : kQK32);
  const std::vector<float> amax32 = block_amax(x, kQK32);
  Reference ref;
  std::vector<float> row(static_cast<size_t>(c.cols));
  ref.y.assign(static_cast<size_t>(c.M * c.rows), 0.0);
  ref.mag.assign(ref.y.size(), 0.0);
  ref.int8.assign(ref.y.size(), 0.0);
  ref.int8_gemv.assign(ref.y.size(), 0.0);
  for (int64_t r = 0; r < c.rows; ++r) {
    dequantize_row(t, w.data() + r * stride, row.data(), c.cols);
    for (int64_t m = 0; m < c.M; ++m) {
      double s = 0, a = 0, q = 0, g = 0;
      for (int64_t i = 0; i < c.cols; ++i) {
        const double p = static_cast<double>(row[i]) * x[m * c.cols + i];
        s += p;
        a += std::fabs(p);
        q += std::fabs(static_cast<double>(row[i])) * amax[m * c.cols + i] / 127.0;
        g += std::fabs(static_cast<double>(row[i])) * amax32[m * c.cols + i] / 127.0 * (0.5 + 1e-4);
      }
      ref.y[m * c.rows + r] = s;
      ref.mag[m * c.rows + r] = a;
      ref.int8[m * c.rows + r] = q;
      ref.int8_gemv[m * c.rows + r] = g;
    }
  }
  return ref;
}

// Whether an M-row matmul of `w` takes the int8-activation GEMV on this device.
bool int8_gemv(const Weight& w, int64_t M) {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return false;
  return cuda::gemv_int8_supported(w, major) && M <= cuda::gemv_int8_max_rows(w);
}

// Relative error bound (times sum |w x|) of the CUDA matmul path taken for (type, M):
// * f32 accumulation (GEMV: a per-lane chain of cols / 256 groups of 8 plus a 5-level warp tree;
//   cuBLAS: a blocked sum): well under 64 u for these sizes.
// * M > 1 rounds the activations to the GEMM's 16-bit type (f16: 2^-11 relative, bf16: 2^-8), and
//   quantised weights to f16 (2^-11) on top.
double matmul_bound(DType t, int64_t M) {
  double b = 64 * kU;
  if (M > 1 && t != DType::F32) b += t == DType::BF16 ? 0x1p-8 : 0x1p-11;
  if (M > 1 && t != DType::F32 && t != DType::F16 && t != DType::BF16) b += 0x1p-11;
  return b;
}

TEST_F(CudaOps, MatmulEveryWeightTypeAgainstDoubleReferenceAndCpu) {
  const MatmulCase cases[] = {
      {67, 512, 1, 0},    // GEMV, a row count that is not a multiple of the warps per block
      {40, 2816, 1, 2},   // GEMV, 2-byte row padding, a partial last segment for the k-quants
      {64, 1024, 3, 0},   // cuBLAS for float types, the int8 GEMV a row at a time for the others
      {64, 1024, 7, 0},   // cuBLAS (dequantise-then-GEMM for the block types)
      {33, 768, 17, 6},   // cuBLAS over padded rows
      {300, 4096, 1, 0},  // GEMV at a real hidden size
      {21, 14336, 1, 2},  // GEMV over more segments than the int8 kernel's stages, padded rows
      {70, 768, 1, 0},    // GEMV of short rows (a warp per rows), a partial last block and step
      {9, 12288, 1, 0},   // GEMV with more int8 units per row than threads (the direct kernel)
      {41, 2048, 1, 0},   // GEMV of rows that take 32 lanes (q4_k), a partial last block
      {33, 96, 1, 0},     // GEMV of rows at odd addresses (MXFP4's 51-byte rows)
      {33, 96, 9, 0},     // ... and their dequantisation for cuBLAS
  };
  for (DType t : kWeightTypes) {
    for (const MatmulCase& c : cases) {
      if (c.cols % dtype_info(t).block_elems != 0) continue;
      const size_t stride = row_bytes(t, c.cols, "matmul") + c.pad * (t == DType::F32 ? 2 : 1);
      const std::vector<uint8_t> host = random_weight(t, c.rows, c.cols, stride, rng_);
      const std::vector<float> x = randn(static_cast<size_t>(c.M * c.cols));
      const Reference ref = reference_matmul(t, host, c, stride, x);

      Weight wg = gpu_->upload_weight(t, c.rows, c.cols, stride, host.data());
      const bool gemv8 = int8_gemv(wg, c.M);
      const size_t n = ref.y.size();
      float* y = upload(std::vector<float>(n));
      gpu_->matmul(wg, upload(x), c.M, y);
      const std::vector<float> got = download(y, n);
      const Weight wc = cpu_->upload_weight(t, c.rows, c.cols, stride, host.data());
      std::vector<float> cpu(n);
      cpu_->matmul(wc, x.data(), c.M, cpu.data());

      // Against the CPU: our bound, plus the CPU's own f32 rounding (same order of size) and, for
      // the block types, its int8 activations (at most half a step of amax / 127 per element).
      const bool int8_acts = !(t == DType::F32 || t == DType::F16 || t == DType::BF16);
      const std::string what = std::string(dtype_name(t)) + " " + std::to_string(c.rows) + "x" +
                               std::to_string(c.cols) + " M=" + std::to_string(c.M);
      int reported = 0;
      for (size_t i = 0; i < n; ++i) {
        const double tol =
            matmul_bound(t, c.M) * ref.mag[i] + (gemv8 ? ref.int8_gemv[i] : 0.0) + 1e-30;
        if (!(std::fabs(got[i] - ref.y[i]) <= tol) && reported++ < 3)
          ADD_FAILURE() << what << " [" << i << "]: cuda " << got[i] << " ref " << ref.y[i]
                        << " tol " << tol;
        const double cpu_tol = tol + 64 * kU * ref.mag[i] + (int8_acts ? ref.int8[i] : 0.0);
        if (!(std::fabs(got[i] - cpu[i]) <= cpu_tol) && reported++ < 3)
          ADD_FAILURE() << what << " vs cpu [" << i << "]: cuda " << got[i] << " cpu " << cpu[i]
                        << " tol " << cpu_tol;
      }
      gpu_->release_weight(wg);
    }
  }
}

CudaOps::PackedPair CudaOps::upload_packed(DType t, int64_t rows, int64_t cols, size_t pad) {
  PackedPair p;
  p.stride = row_bytes(t, static_cast<uint64_t>(cols), "packed pair") + pad;
  p.host = random_weight(t, rows, cols, p.stride, rng_);
  p.rows = gpu_->upload_weight(t, rows, cols, p.stride, p.host.data());
  p.packed = gpu_->upload_weight(t, rows, cols, p.stride, p.host.data());
  gpu_->pack_weight(p.packed);
  return p;
}

// The matmul of p.packed against that of p.rows over M rows x: the same bits where the file's
// layout takes the int8 kernel (sm_90) or a GEMM, else (the f32 GEMV before sm_90) within the int8
// GEMV's bound of the double reference. Returns the packed weight's outputs.
std::vector<float> CudaOps::expect_packed_as_rows(const PackedPair& p, const std::vector<float>& x,
                                                  int64_t M, const std::string& what) {
  const float* xd = upload(x);
  const size_t n = static_cast<size_t>(M * p.rows.rows);
  float* y_rows = upload(std::vector<float>(n));
  float* y_packed = upload(std::vector<float>(n));
  gpu_->matmul(p.rows, xd, M, y_rows);
  gpu_->matmul(p.packed, xd, M, y_packed);
  const std::vector<float> want = download(y_rows, n);
  std::vector<float> got = download(y_packed, n);
  if (M > cuda::kGemvRows || int8_gemv(p.rows, M)) {
    test::expect_close(got, want, 0.0f, 0.0f, what + " matmul M=" + std::to_string(M));
  } else {
    const MatmulCase c{p.rows.rows, p.rows.cols, M, 0};
    const Reference ref = reference_matmul(p.rows.dtype, p.host, c, p.stride, x);
    for (size_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[i], ref.y[i], 64 * kU * ref.mag[i] + ref.int8_gemv[i]) << what << i;
  }
  return got;
}

// Embedding rows of p.packed (first, last, repeated) gives p.rows' values, bit for bit.
void CudaOps::expect_packed_embeds_as_rows(const PackedPair& p, const std::string& what) {
  const std::vector<int32_t> ids = {0, static_cast<int32_t>(p.rows.rows - 1), 5, 5, 3};
  const size_t n = ids.size() * static_cast<size_t>(p.rows.cols);
  float* e_rows = upload(std::vector<float>(n));
  float* e_packed = upload(std::vector<float>(n));
  gpu_->embed(p.rows, ids.data(), static_cast<int64_t>(ids.size()), 1.0f, e_rows);
  gpu_->embed(p.packed, ids.data(), static_cast<int64_t>(ids.size()), 1.0f, e_packed);
  test::expect_close(download(e_packed, n), download(e_rows, n), 0.0f, 0.0f, what + " embed");
}

// q8_0 packed into 4-row groups (WeightLayout::Q8Groups) reads as the file's layout: the GEMV
// takes the int8 kernel's units in its order (the same bits on sm_90, where that kernel runs), and
// the embedding and the dequantise-then-GEMM path decode the same values. Weights the groups do
// not fit keep the file's layout.
TEST_F(CudaOps, Q8GroupsSameBitsAsTheFileLayout) {
  struct Shape {
    int64_t rows, cols;
  };
  for (const Shape sh : {Shape{64, 4096}, Shape{8, 14336}, Shape{300, 1024}, Shape{12, 64}}) {
    PackedPair p = upload_packed(DType::Q8_0, sh.rows, sh.cols);
    const std::string what =
        "q8_0 groups " + std::to_string(sh.rows) + "x" + std::to_string(sh.cols);
    ASSERT_EQ(p.packed.layout, WeightLayout::Q8Groups) << what;
    EXPECT_EQ(gpu_->weight_row_group(DType::Q8_0), kQ8GroupRows);
    for (int64_t M : {1, 3, 7})
      expect_packed_as_rows(p, randn(static_cast<size_t>(M * sh.cols)), M, what);
    expect_packed_embeds_as_rows(p, what);
    release(p);
  }
  for (const Shape sh : {Shape{6, 1024}, Shape{8, 96}}) {  // rows not in fours; rows of odd words
    PackedPair p = upload_packed(DType::Q8_0, sh.rows, sh.cols);
    EXPECT_EQ(p.packed.layout, WeightLayout::Rows) << sh.rows << "x" << sh.cols;
    release(p);
  }
}

// q6_k packed into groups of rows of bodies then d values (WeightLayout::Q6Rows) reads as the
// file's layout: the GEMV takes the int8 kernel's units in its order (the same bits on sm_90, where
// that kernel runs), also under an expert index and through a view of some of the rows (from a
// group's first row), and the embedding and the dequantise-then-GEMM path decode the same values.
// Rows of 8 blocks or a multiple of 8 are groups of their own; rows of 3, 4, 6 and 12 blocks (an
// MoE expert's down projection of 768 or 1536 columns) take groups of 8, 2, 4 and 2 rows. Weights
// whose rows are not whole groups, or whose groups would not fit shared memory, keep the file's
// layout.
TEST_F(CudaOps, Q6RowsSameBitsAsTheFileLayout) {
  struct Shape {
    int64_t rows, cols;
  };
  for (const Shape sh : {Shape{64, 4096}, Shape{8, 14336}, Shape{300, 2048}, Shape{13, 6144},
                         Shape{64, 768}, Shape{24, 1024}, Shape{40, 1536}, Shape{18, 3072}}) {
    PackedPair p = upload_packed(DType::Q6_K, sh.rows, sh.cols);
    const Weight& packed = p.packed;
    const size_t stride = p.stride;
    const std::string what = "q6_k rows " + std::to_string(sh.rows) + "x" + std::to_string(sh.cols);
    ASSERT_EQ(packed.layout, WeightLayout::Q6Rows) << what;
    EXPECT_EQ(gpu_->weight_row_group(DType::Q6_K), kQ6MaxGroupRows);
    EXPECT_TRUE(int8_gemv(packed, 1)) << what;
    for (int64_t M : {1, 3, 7}) {
      const std::vector<float> x = randn(static_cast<size_t>(M * sh.cols));
      const std::vector<float> got = expect_packed_as_rows(p, x, M, what);
      if (M > 1) continue;
      const float* xd = upload(x);
      const size_t n = static_cast<size_t>(sh.rows);
      // Rows [v0, rows - 2) through a view (v0 = 5 where rows are groups of their own, else a
      // group's first row), and the weight under an index of two experts (the same weight twice:
      // ids 1, 0), each expert's row its own.
      const int64_t blocks = sh.cols / 256;
      const int64_t v0 = blocks % 8 == 0 ? 5 : blocks % 4 == 0 ? 2 : blocks % 2 == 0 ? 4 : 8;
      const int64_t vr = sh.rows - v0 - 2;
      const Weight view{
          DType::Q6_K,  vr, sh.cols, stride, static_cast<const uint8_t*>(packed.data) + v0 * stride,
          packed.layout};
      float* y_view = upload(std::vector<float>(static_cast<size_t>(vr)));
      gpu_->matmul(view, xd, 1, y_view);
      const std::vector<float> v = download(y_view, static_cast<size_t>(vr));
      EXPECT_TRUE(std::equal(v.begin(), v.end(), got.begin() + v0)) << "view " << what;
      const std::vector<const void*> table = {packed.data, packed.data};
      auto* d_table = static_cast<const void**>(device_bytes(table.size() * sizeof(void*)));
      gpu_->to_device(d_table, table.data(), table.size() * sizeof(void*));
      const std::vector<int32_t> ids = {1, 0};
      auto* d_ids = static_cast<int32_t*>(device_bytes(ids.size() * sizeof(int32_t)));
      gpu_->to_device(d_ids, ids.data(), ids.size() * sizeof(int32_t));
      float* y_ix = upload(std::vector<float>(2 * n));
      gpu_->matmul_indexed(packed, d_table, d_ids, 2, xd, 0, 1, y_ix);
      const std::vector<float> ix = download(y_ix, 2 * n);
      EXPECT_TRUE(std::equal(ix.begin(), ix.begin() + static_cast<std::ptrdiff_t>(n), got.begin()))
          << "indexed " << what;
      EXPECT_TRUE(std::equal(ix.begin() + static_cast<std::ptrdiff_t>(n), ix.end(), got.begin()))
          << "indexed " << what;
    }
    expect_packed_embeds_as_rows(p, what);
    release(p);
  }
  // 9 and 3 blocks a row in fewer rows than their groups of 8; 4 blocks a row in an odd number of
  // rows; 8 blocks a row over 16 padding bytes; 1120 blocks a row (235200 bytes, over the 227 KiB
  // of shared memory of any supported GPU).
  struct Unfit {
    int64_t rows, cols;
    size_t pad;
  };
  for (const Unfit sh : {Unfit{6, 2304, 0}, Unfit{12, 768, 0}, Unfit{7, 1024, 0},
                         Unfit{8, 2048, 16}, Unfit{2, 286720, 0}}) {
    PackedPair p = upload_packed(DType::Q6_K, sh.rows, sh.cols, sh.pad);
    EXPECT_EQ(p.packed.layout, WeightLayout::Rows)
        << sh.rows << "x" << sh.cols << " pad " << sh.pad;
    release(p);
  }
}

// Groups: empty ones, one row, rows that are not a multiple of the 64-row tile, more than one
// tile; features not a multiple of the 128-feature tile; K not a multiple of the 64-column stage,
// in fewer stages than the pipeline holds (136) and in more (1032); padded weight rows.
TEST_F(CudaOps, MatmulGroupedAgainstCpuPerGroup) {
  struct Shape {
    int64_t rows, cols;
    size_t pad;
  };
  const Shape shapes[] = {{200, 136, 16}, {128, 256, 0}, {40, 1032, 32}};
  const std::vector<int64_t> group_rows = {5, 0, 64, 70, 1, 0, 33, 130};
  for (const DType t : {DType::F16, DType::BF16}) {
    for (const Shape& sh : shapes) {
      const int64_t G = static_cast<int64_t>(group_rows.size());
      const size_t stride = static_cast<size_t>(sh.cols) * 2 + sh.pad;
      std::vector<int64_t> row0(group_rows.size());
      int64_t total = 0;
      for (size_t g = 0; g < group_rows.size(); ++g) row0[g] = total, total += group_rows[g];
      std::vector<std::vector<uint8_t>> hosts;
      std::vector<Weight> wg, wc;
      std::vector<const void*> ptrs;
      for (int64_t g = 0; g < G; ++g) {
        hosts.push_back(random_weight(t, sh.rows, sh.cols, stride, rng_));
        wg.push_back(gpu_->upload_weight(t, sh.rows, sh.cols, stride, hosts.back().data()));
        wc.push_back(cpu_->upload_weight(t, sh.rows, sh.cols, stride, hosts.back().data()));
        ptrs.push_back(wg.back().data);
      }
      const std::vector<float> x = randn(static_cast<size_t>(total * sh.cols));
      const size_t n = static_cast<size_t>(total * sh.rows);
      float* y = upload(std::vector<float>(n));
      const float* dx = upload(x);
      gpu_->matmul_grouped(wg[0], ptrs.data(), row0.data(), group_rows.data(), G, dx, y);
      const std::vector<float> got = download(y, n);

      const double u16 = t == DType::BF16 ? 0x1p-8 : 0x1p-11;
      const std::string what = std::string(dtype_name(t)) + " " + std::to_string(sh.rows) + "x" +
                               std::to_string(sh.cols);
      int reported = 0;
      for (int64_t g = 0; g < G; ++g) {
        if (group_rows[static_cast<size_t>(g)] == 0) continue;
        const int64_t r0 = row0[static_cast<size_t>(g)], R = group_rows[static_cast<size_t>(g)];
        std::vector<float> want(static_cast<size_t>(R * sh.rows));
        cpu_->matmul(wc[static_cast<size_t>(g)], x.data() + r0 * sh.cols, R, want.data());
        const auto* hw = hosts[static_cast<size_t>(g)].data();
        for (int64_t m = 0; m < R; ++m)
          for (int64_t o = 0; o < sh.rows; ++o) {
            double mag = 0;
            for (int64_t i = 0; i < sh.cols; ++i) {
              uint16_t h;
              std::memcpy(&h, hw + o * stride + 2 * i, 2);
              const float wv = t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
              mag += std::fabs(static_cast<double>(wv) * x[(r0 + m) * sh.cols + i]);
            }
            const double tol = (u16 + 2.0 * static_cast<double>(sh.cols) * kU) * mag + 1e-30;
            const float a = got[static_cast<size_t>((r0 + m) * sh.rows + o)];
            const float b = want[static_cast<size_t>(m * sh.rows + o)];
            if (!(std::fabs(a - b) <= tol) && reported++ < 5)
              ADD_FAILURE() << what << " group " << g << " row " << m << " out " << o << ": cuda "
                            << a << " cpu " << b << " tol " << tol;
          }
      }
      for (Weight& w : wg) gpu_->release_weight(w);
    }
  }
}

// matmul_grouped over q8_0 experts (the tensor-core kernel of grouped_mma_q8.cu), packed into
// 4-row groups or in the file's layout, against a double-precision product of the dequantised
// weights (code * scale, exact in f32) with the activations rounded to f16, as the kernel rounds
// them. Bound per output, with s = sum_k |w_k x16_k| over its K columns, nb = K / 32 blocks, s_b
// the sum over block b:
// * a block's 32 products code * x16 are exact in f32 (8-bit times 11-bit significands); the
//   tensor cores add them to the block's f32 partial in two m16n8k16 steps, each with at most 18
//   truncations (16 products, the accumulator, the result) of at most ulp(max term) <= 2 u s_b:
//   72 u s_b per block, 72 u s over all blocks;
// * each partial times its scale is added to the running sum by one FMA: nb roundings of at most
//   u s; one u s more covers the second-order terms.
// |cuda - ref| <= (73 + nb) u s.
// A one-row group is the decode GEMV: against the reference of the unrounded x, with that path's
// bound (64 u sum |w x| plus its int8 activations' error, as in
// MatmulEveryWeightTypeAgainstDoubleReferenceAndCpu).
// Groups: empty ones, one row, rows that are not a multiple of the 64-row tile, more than one
// tile; features not a multiple of the 128-feature tile, fewer than one tile; K of 2 blocks (one
// stage of two, fewer than the pipeline holds), an odd number of 64-column pairs (a packed row's
// scales then only 4-byte aligned) and, in the file's layout, an odd number of blocks over padded
// rows, so that the last stage holds one block, in fewer stages than the pipeline holds (K = 96)
// and in more (K = 1056); neither can be packed: Q8GroupsSameBitsAsTheFileLayout.
TEST_F(CudaOps, MatmulGroupedQ8AgainstDoubleReference) {
  struct Shape {
    int64_t rows, cols;
    size_t pad;  // bytes past each row
    bool pack;
  };
  const Shape shapes[] = {{200, 192, 0, true},  {128, 64, 0, true},   {36, 1088, 0, true},
                          {200, 192, 0, false}, {36, 1088, 0, false}, {72, 96, 2, false},
                          {40, 1056, 2, false}};
  const std::vector<int64_t> group_rows = {5, 0, 64, 70, 1, 0, 33, 130};
  const int64_t G = static_cast<int64_t>(group_rows.size());
  std::vector<int64_t> row0(group_rows.size());
  int64_t total = 0;
  for (size_t g = 0; g < group_rows.size(); ++g) row0[g] = total, total += group_rows[g];
  for (const Shape& sh : shapes) {
    const size_t stride = row_bytes(DType::Q8_0, sh.cols, "test") + sh.pad;
    std::vector<std::vector<float>> deq;  // per group: [sh.rows][sh.cols], code * scale
    std::vector<Weight> wg;
    std::vector<const void*> ptrs;
    for (int64_t g = 0; g < G; ++g) {
      const std::vector<uint8_t> host = random_weight(DType::Q8_0, sh.rows, sh.cols, stride, rng_);
      deq.emplace_back(static_cast<size_t>(sh.rows * sh.cols));
      for (int64_t o = 0; o < sh.rows; ++o)
        dequantize_row(DType::Q8_0, host.data() + o * stride, deq.back().data() + o * sh.cols,
                       sh.cols);
      wg.push_back(gpu_->upload_weight(DType::Q8_0, sh.rows, sh.cols, stride, host.data()));
      if (sh.pack) gpu_->pack_weight(wg.back());
      ASSERT_EQ(wg.back().layout, sh.pack ? WeightLayout::Q8Groups : WeightLayout::Rows);
      ptrs.push_back(wg.back().data);
    }
    const std::vector<float> x = randn(static_cast<size_t>(total * sh.cols));
    const std::vector<float> amax = block_amax(x, kQK32);
    const size_t n = static_cast<size_t>(total * sh.rows);
    float* y = upload(std::vector<float>(n));
    gpu_->matmul_grouped(wg[0], ptrs.data(), row0.data(), group_rows.data(), G, upload(x), y);
    const std::vector<float> got = download(y, n);

    const std::string what =
        std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + (sh.pack ? " groups" : " rows");
    const double nb = static_cast<double>(sh.cols) / kQK32;
    int reported = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t R = group_rows[static_cast<size_t>(g)];
      for (int64_t m = row0[static_cast<size_t>(g)]; m < row0[static_cast<size_t>(g)] + R; ++m)
        for (int64_t o = 0; o < sh.rows; ++o) {
          const float* wr = deq[static_cast<size_t>(g)].data() + o * sh.cols;
          const float* xr = x.data() + m * sh.cols;
          double ref = 0, mag = 0, int8 = 0;
          for (int64_t i = 0; i < sh.cols; ++i) {
            const double xi = R == 1 ? xr[i] : f16_to_f32(f32_to_f16(xr[i]));
            ref += static_cast<double>(wr[i]) * xi;
            mag += std::fabs(static_cast<double>(wr[i]) * xi);
            int8 += std::fabs(static_cast<double>(wr[i])) * amax[m * sh.cols + i] / 127.0 *
                    (0.5 + 1e-4);
          }
          const double tol = (R == 1 ? 64 * kU * mag + int8 : (73 + nb) * kU * mag) + 1e-30;
          const float a = got[static_cast<size_t>(m * sh.rows + o)];
          if (!(std::fabs(a - ref) <= tol) && reported++ < 5)
            ADD_FAILURE() << what << " group " << g << " row " << m << " out " << o << ": cuda "
                          << a << " ref " << ref << " tol " << tol;
        }
    }
    for (Weight& w : wg) gpu_->release_weight(w);
  }
}

// A row's result does not depend on the rest of the call: each group alone (G = 1, as expert
// streaming calls it) and a group split in three at odd rows (its rows at other positions of the
// kernel's tiles) give the same bits as one call over every group; a one-row group gives the
// bits of a one-row matmul. Empty calls write nothing. For f16 / bf16 weights and q8_0 ones packed
// into 4-row groups (the two tensor-core kernels).
TEST_F(CudaOps, MatmulGroupedRowsBitIdenticalAcrossGroupings) {
  struct Case {
    DType t;
    int64_t cols;  // q8_0: a multiple of 64, which the 4-row groups need
  };
  const int64_t rows = 200;
  const std::vector<int64_t> group_rows = {37, 0, 90, 1, 64};
  const int64_t G = static_cast<int64_t>(group_rows.size());
  for (const Case c : {Case{DType::F16, 264}, Case{DType::BF16, 264}, Case{DType::Q8_0, 320}}) {
    const DType t = c.t;
    const int64_t cols = c.cols;
    const size_t stride = row_bytes(t, cols, "test");
    std::vector<int64_t> row0(group_rows.size());
    int64_t total = 0;
    for (size_t g = 0; g < group_rows.size(); ++g) row0[g] = total, total += group_rows[g];
    std::vector<Weight> wg;
    std::vector<const void*> ptrs;
    for (int64_t g = 0; g < G; ++g) {
      const std::vector<uint8_t> host = random_weight(t, rows, cols, stride, rng_);
      wg.push_back(gpu_->upload_weight(t, rows, cols, stride, host.data()));
      if (t == DType::Q8_0) {
        gpu_->pack_weight(wg.back());
        ASSERT_EQ(wg.back().layout, WeightLayout::Q8Groups);
      }
      ptrs.push_back(wg.back().data);
    }
    const float* dx = upload(randn(static_cast<size_t>(total * cols)));
    const size_t n = static_cast<size_t>(total * rows);
    float* all = upload(std::vector<float>(n));
    gpu_->matmul_grouped(wg[0], ptrs.data(), row0.data(), group_rows.data(), G, dx, all);
    float* alone = upload(std::vector<float>(n));
    for (int64_t g = 0; g < G; ++g)
      gpu_->matmul_grouped(wg[0], &ptrs[static_cast<size_t>(g)], &row0[static_cast<size_t>(g)],
                           &group_rows[static_cast<size_t>(g)], 1, dx, alone);
    const std::vector<float> want = download(all, n);
    EXPECT_EQ(download(alone, n), want) << dtype_name(t) << " groups alone";
    // The one-row group is a one-row matmul (the GEMV of decode).
    float* one = upload(std::vector<float>(static_cast<size_t>(rows)));
    gpu_->matmul(wg[3], dx + row0[3] * cols, 1, one);
    const std::vector<float> gemv = download(one, static_cast<size_t>(rows));
    EXPECT_TRUE(std::equal(gemv.begin(), gemv.end(), want.begin() + row0[3] * rows))
        << dtype_name(t) << " one-row group";

    // Group 2 (90 rows) split at row 7 (rows 7.. start a tile), and again at row 50.
    float* split = upload(std::vector<float>(n));
    const std::vector<const void*> p2 = {ptrs[2], ptrs[2], ptrs[2]};
    const std::vector<int64_t> s0 = {row0[2], row0[2] + 7, row0[2] + 50};
    const std::vector<int64_t> sr = {7, 43, 40};
    gpu_->matmul_grouped(wg[0], p2.data(), s0.data(), sr.data(), 3, dx, split);
    const std::vector<float> got = download(split, n);
    const size_t b = static_cast<size_t>(row0[2] * rows), e = b + static_cast<size_t>(90 * rows);
    EXPECT_TRUE(std::equal(got.begin() + b, got.begin() + e, want.begin() + b))
        << dtype_name(t) << " group split";

    float* untouched = upload(std::vector<float>(n, 1.5f));
    const int64_t zero_rows = 0;
    gpu_->matmul_grouped(wg[0], ptrs.data(), row0.data(), &zero_rows, 1, dx, untouched);
    EXPECT_EQ(download(untouched, n), std::vector<float>(n, 1.5f)) << dtype_name(t) << " empty";
    for (Weight& w : wg) gpu_->release_weight(w);
  }
}

// q4_k and q5_k experts, decoded to f16 in the grouped kernel (groups of one row tile and of
// several), and the block types it doesn't read (q6_k, also with 630-byte rows that keep 2-byte
// alignment only and packed into WeightLayout::Q6Rows; q5_0; q8_0 rows that are not 4-byte
// aligned), dequantised to f16 for its f16 path: the bits of the grouped matmul of their f16
// dequantisation (made on the host), one-row groups the bits of the GEMV. The large case holds
// two experts per dequantisation batch: its three take two.
TEST_F(CudaOps, MatmulGroupedOtherTypesAsTheirF16Dequantisation) {
  struct Case {
    DType t;
    int64_t rows, cols;
    bool packed = false;  // through pack_weight (q6_k rows of a multiple of 2048: Q6Rows)
  };
  // Groups 0..4: the one-row group (3) and the empty one (4) as the last two.
  const std::vector<int64_t> short_rows = {3, 2, 20, 1, 0}, long_rows = {3, 140, 70, 1, 0};
  for (const Case c :
       {Case{DType::Q4_K, 96, 256}, Case{DType::Q5_K, 72, 512}, Case{DType::Q6_K, 40, 512},
        Case{DType::Q6_K, 136, 768}, Case{DType::Q6_K, 130, 2048, true}, Case{DType::Q8_0, 96, 96},
        Case{DType::Q5_0, 33, 64}, Case{DType::IQ4_NL, 33, 64}, Case{DType::IQ4_XS, 40, 512},
        Case{DType::IQ2_XXS, 40, 512}, Case{DType::IQ3_S, 24, 768}, Case{DType::IQ1_M, 40, 256},
        Case{DType::TQ1_0, 33, 512}, Case{DType::MXFP4, 33, 96}, Case{DType::Q4_K, 4096, 8192}}) {
    const size_t stride = row_bytes(c.t, c.cols, "test");
    const int64_t G = 5;
    std::vector<Weight> wq, wf;
    std::vector<const void*> pq, pf;
    std::vector<float> row(static_cast<size_t>(c.cols));
    std::vector<uint16_t> f16(static_cast<size_t>(c.rows * c.cols));
    for (int64_t g = 0; g < G; ++g) {
      const std::vector<uint8_t> host = random_weight(c.t, c.rows, c.cols, stride, rng_);
      wq.push_back(gpu_->upload_weight(c.t, c.rows, c.cols, stride, host.data()));
      if (c.packed) gpu_->pack_weight(wq.back());
      for (int64_t r = 0; r < c.rows; ++r) {
        dequantize_row(c.t, host.data() + r * stride, row.data(), c.cols);
        for (int64_t i = 0; i < c.cols; ++i)
          f16[static_cast<size_t>(r * c.cols + i)] = f32_to_f16(row[static_cast<size_t>(i)]);
      }
      wf.push_back(gpu_->upload_weight(DType::F16, c.rows, c.cols, static_cast<size_t>(c.cols) * 2,
                                       f16.data()));
      pq.push_back(wq.back().data);
      pf.push_back(wf.back().data);
    }
    if (c.packed) {
      EXPECT_EQ(wq[0].layout, WeightLayout::Q6Rows);
    }
    for (const std::vector<int64_t>& group_rows : {short_rows, long_rows}) {
      std::vector<int64_t> row0(group_rows.size(), 0);
      std::partial_sum(group_rows.begin(), group_rows.end() - 1, row0.begin() + 1);
      const int64_t M = row0.back();  // the rows of all groups: the empty one starts past them
      std::vector<int64_t> f16_rows = group_rows;
      f16_rows[3] = 0;
      const float* dx = upload(randn(static_cast<size_t>(M * c.cols)));
      const size_t n = static_cast<size_t>(M * c.rows);
      float* got = upload(std::vector<float>(n));
      gpu_->matmul_grouped(wq[0], pq.data(), row0.data(), group_rows.data(), G, dx, got);
      float* want = upload(std::vector<float>(n));
      gpu_->matmul_grouped(wf[0], pf.data(), row0.data(), f16_rows.data(), G, dx, want);
      gpu_->matmul(wq[3], dx + row0[3] * c.cols, 1, want + row0[3] * c.rows);
      EXPECT_EQ(download(got, n), download(want, n))
          << dtype_name(c.t) << " " << c.rows << " rows, groups of " << group_rows[1];
    }
    for (Weight& w : wq) gpu_->release_weight(w);
    for (Weight& w : wf) gpu_->release_weight(w);
  }
}

// q8_0 experts in the file's layout (streamed ones) give the bits of the same experts packed into
// 4-row groups (resident ones): the same kernel arithmetic for groups of more than one row, and
// for a one-row group the GEMV, which gives the same bits on sm_90
// (Q8GroupsSameBitsAsTheFileLayout).
TEST_F(CudaOps, MatmulGroupedQ8FileLayoutSameBitsAsGroups) {
  const int64_t rows = 136, cols = 320;
  const std::vector<int64_t> group_rows = {70, 1, 0, 9};
  const int64_t G = static_cast<int64_t>(group_rows.size());
  std::vector<int64_t> row0(group_rows.size());
  int64_t total = 0;
  for (size_t g = 0; g < group_rows.size(); ++g) row0[g] = total, total += group_rows[g];
  const size_t stride = row_bytes(DType::Q8_0, cols, "test");
  std::vector<Weight> file, packed;
  std::vector<const void*> file_ptrs, packed_ptrs;
  for (int64_t g = 0; g < G; ++g) {
    const std::vector<uint8_t> host = random_weight(DType::Q8_0, rows, cols, stride, rng_);
    file.push_back(gpu_->upload_weight(DType::Q8_0, rows, cols, stride, host.data()));
    packed.push_back(gpu_->upload_weight(DType::Q8_0, rows, cols, stride, host.data()));
    gpu_->pack_weight(packed.back());
    ASSERT_EQ(packed.back().layout, WeightLayout::Q8Groups);
    file_ptrs.push_back(file.back().data);
    packed_ptrs.push_back(packed.back().data);
  }
  const float* dx = upload(randn(static_cast<size_t>(total * cols)));
  const size_t n = static_cast<size_t>(total * rows);
  float* y_file = upload(std::vector<float>(n));
  float* y_packed = upload(std::vector<float>(n));
  gpu_->matmul_grouped(file[0], file_ptrs.data(), row0.data(), group_rows.data(), G, dx, y_file);
  gpu_->matmul_grouped(packed[0], packed_ptrs.data(), row0.data(), group_rows.data(), G, dx,
                       y_packed);
  const std::vector<float> got = download(y_file, n), want = download(y_packed, n);
  const size_t one_b = static_cast<size_t>(row0[1] * rows),
               one_e = one_b + static_cast<size_t>(rows);
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + one_b, want.begin())) << "groups 0";
  EXPECT_TRUE(std::equal(got.begin() + one_e, got.end(), want.begin() + one_e)) << "groups 2, 3";
  if (int8_gemv(file[1], 1)) {
    EXPECT_TRUE(std::equal(got.begin() + one_b, got.begin() + one_e, want.begin() + one_b))
        << "one-row group";
  }
  for (Weight& w : file) gpu_->release_weight(w);
  for (Weight& w : packed) gpu_->release_weight(w);
}

// A one-row matmul whose activations are not 16-byte aligned (an offset into a buffer) still runs:
// in f32 through the element-load GEMV variants, or (q8_0 on sm_90, q4_k) through the int8 GEMV,
// whose activation quantisation reads x one element per thread.
// A few rows over quantised weights (the server's batched decode) take the GEMV, which reads each
// weight unit once for up to 4 of them (5 to 8 rows: two launches): each row gets the bits of its
// own one-row matmul, packed layouts included. More rows take the GEMM (within the GEMV's bound of
// it, checked elsewhere).
TEST_F(CudaOps, FewRowsGetTheBitsOfOneRowEach) {
  const int64_t rows = 136;
  // q4_k / q5_k rows of 8, 16 and 17 blocks take 16, 32 and 64 lanes a row; 17 also leaves lanes
  // with one unit fewer. q5_0 takes the staged kernel, a launch per row.
  for (const int64_t cols : {int64_t{2048}, int64_t{1024}, int64_t{4352}})
    for (const DType t : {DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q5_0}) {
      const size_t stride = row_bytes(t, cols, "test");
      const std::vector<uint8_t> host = random_weight(t, rows, cols, stride, rng_);
      Weight w = gpu_->upload_weight(t, rows, cols, stride, host.data());
      gpu_->pack_weight(w);
      for (int64_t M = 2; M <= cuda::gemv_int8_max_rows(w); ++M) {
        const float* x = upload(randn(static_cast<size_t>(M * cols)));
        float* many = upload(std::vector<float>(static_cast<size_t>(M * rows)));
        float* one = upload(std::vector<float>(static_cast<size_t>(M * rows)));
        gpu_->matmul(w, x, M, many);
        for (int64_t m = 0; m < M; ++m) gpu_->matmul(w, x + m * cols, 1, one + m * rows);
        EXPECT_EQ(download(many, static_cast<size_t>(M * rows)),
                  download(one, static_cast<size_t>(M * rows)))
            << dtype_name(t) << ", " << cols << " columns, " << M << " rows";
      }
      gpu_->release_weight(w);
    }
}

TEST_F(CudaOps, MatmulUnalignedActivations) {
  const MatmulCase c{48, 256, 1, 0};
  for (DType t : {DType::F32, DType::BF16, DType::Q8_0, DType::Q4_K}) {
    const size_t stride = row_bytes(t, c.cols, "matmul");
    const std::vector<uint8_t> host = random_weight(t, c.rows, c.cols, stride, rng_);
    std::vector<float> x = randn(static_cast<size_t>(c.cols) + 1);
    const Reference ref =
        reference_matmul(t, host, c, stride, std::vector<float>(x.begin() + 1, x.end()));
    Weight w = gpu_->upload_weight(t, c.rows, c.cols, stride, host.data());
    float* y = upload(std::vector<float>(ref.y.size()));
    gpu_->matmul(w, upload(x) + 1, 1, y);
    const std::vector<float> got = download(y, ref.y.size());
    const bool gemv8 = int8_gemv(w, 1);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], ref.y[i], 64 * kU * ref.mag[i] + (gemv8 ? ref.int8_gemv[i] : 0.0))
          << dtype_name(t) << " " << i;
    gpu_->release_weight(w);
  }
}

// The activations of a tensor-core GEMM: each element rounded to nearest even, the same bits
// through the 8-wide kernel (aligned, length a multiple of 8) and the element-wise one.
TEST_F(CudaOps, ConvertActivationsRoundToNearestEven) {
  std::vector<float> x = randn(4099);
  x[0] = 1.0f + 1.0f / 2048;  // a tie in f16: stays 1
  x[1] = 70000.0f;            // beyond f16: inf
  x[2] = 1e-30f;              // below both types' normals
  x[3] = -0.0f;
  const float* d_x = upload(x);
  auto* out = static_cast<uint16_t*>(gpu_->alloc(x.size() * 2 + 16));
  for (DType t : {DType::F16, DType::BF16})
    for (const auto& [offset, n] : {std::pair<size_t, int64_t>{0, 4096}, {0, 4099}, {1, 4096}}) {
      cuda::launch_convert_f32(d_x + offset, n, t, out, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> got(static_cast<size_t>(n));
      gpu_->to_host(got.data(), out, got.size() * 2);
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[offset + static_cast<size_t>(i)];
        ASSERT_EQ(got[static_cast<size_t>(i)], t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v))
            << dtype_name(t) << " element " << i << " of " << n << " from offset " << offset;
      }
    }
  gpu_->free(out);
}

// Plain f32 arithmetic: the same operations as the CPU loops, so equal up to the CUDA math
// library's expf/tanhf (2 ulp) and FMA contraction.
TEST_F(CudaOps, ElementwiseOps) {
  const int64_t M = 3, n = 1000;
  const std::vector<float> a = randn(static_cast<size_t>(M * n), 2.0f),
                           b = randn(static_cast<size_t>(M * n), 2.0f);
  const std::vector<float> bias = randn(static_cast<size_t>(n));
  const size_t N = a.size();
  {
    std::vector<float> want = a;
    cpu_->add_bias(want.data(), bias.data(), M, n);
    float* y = upload(a);
    gpu_->add_bias(y, upload(bias), M, n);
    test::expect_close(download(y, N), want, 0.0f, 1e-7f, "add_bias");
  }
  {
    std::vector<float> want = a;
    cpu_->add(want.data(), b.data(), static_cast<int64_t>(N));
    float* y = upload(a);
    gpu_->add(y, upload(b), static_cast<int64_t>(N));
    test::expect_close(download(y, N), want, 0.0f, 1e-7f, "add");
    gpu_->zero(y, static_cast<int64_t>(N));
    test::expect_close(download(y, N), std::vector<float>(N, 0.0f), 0.0f, 0.0f, "zero");
  }
  // Both layouts of glu: separate gate and up rows, and each row as [gate | up] (stride 2n).
  struct GluCase {
    const float *gate, *up, *gate_dev, *up_dev;
    int64_t n, stride;
  };
  const float* da = upload(a);
  const float* db = upload(b);
  for (const GluCase g : {GluCase{a.data(), b.data(), da, db, n, n},
                          GluCase{a.data(), a.data() + n / 2, da, da + n / 2, n / 2, n}}) {
    const size_t out_n = static_cast<size_t>(M * g.n);
    std::vector<float> want(out_n);
    cpu_->glu(Glu::SiLU, g.gate, g.up, M, g.n, g.stride, want.data());
    float* y = upload(std::vector<float>(out_n));
    gpu_->glu(Glu::SiLU, g.gate_dev, g.up_dev, M, g.n, g.stride, y);
    test::expect_close(download(y, out_n), want, 1e-7f, 1e-6f, "swiglu");

    cpu_->glu(Glu::GeluTanh, g.gate, g.up, M, g.n, g.stride, want.data());
    gpu_->glu(Glu::GeluTanh, g.gate_dev, g.up_dev, M, g.n, g.stride, y);
    // Where tanh is near -1, (1 + tanh) cancels: the two tanh implementations' few-ulp difference
    // (<= 3 * 6e-8) then shows as an absolute error of 0.5 |gate * up| times that.
    const std::vector<float> got = download(y, out_n);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t i = 0; i < g.n; ++i) {
        const size_t o = static_cast<size_t>(m * g.n + i),
                     at = static_cast<size_t>(m * g.stride + i);
        EXPECT_NEAR(got[o], want[o],
                    1e-6f * std::fabs(want[o]) + 2e-7f * std::fabs(g.gate[at] * g.up[at]))
            << "geglu " << o;
      }
  }
  {
    // gpt-oss's clamped SwiGLU, with a limit inside the inputs' spread so that both clamps act.
    const ClampedSwiGlu p{1.702f, 1.5f};
    std::vector<float> want(N);
    cpu_->glu_clamped(a.data(), b.data(), M, n, n, p, want.data());
    float* y = upload(std::vector<float>(N));
    gpu_->glu_clamped(upload(a), upload(b), M, n, n, p, y);
    test::expect_close(download(y, N), want, 1e-7f, 1e-6f, "clamped swiglu");
  }
  {
    std::vector<float> want = a;
    cpu_->softcap(want.data(), static_cast<int64_t>(N), 1.5f);
    float* y = upload(a);
    gpu_->softcap(y, static_cast<int64_t>(N), 1.5f);
    test::expect_close(download(y, N), want, 1e-7f, 1e-6f, "softcap");
  }
}

// Perplexity's scores on the device against the CPU backend's (the same double arithmetic, summed
// in another order): rows of Qwen3's vocabulary with a wide spread, targets at the ends too.
TEST_F(CudaOps, NllRowsAsTheCpuBackend) {
  const int64_t n = 7, V = 151936;
  std::vector<float> logits = randn(static_cast<size_t>(n * V));
  for (float& x : logits) x *= 6.0f;
  const std::vector<int32_t> targets = {0, 151935, 17, 70000, 3, 151935, 99999};
  std::vector<double> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  cpu_->nll_rows(logits.data(), n, V, targets.data(), want.data());
  gpu_->nll_rows(upload(logits), n, V, targets.data(), got.data());
  for (size_t i = 0; i < static_cast<size_t>(n); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12 * std::fabs(want[i])) << "row " << i;
}

TEST_F(CudaOps, GatherAndScatterRows) {
  const int64_t rows = 6, n = 300;
  const std::vector<float> x = randn(static_cast<size_t>(rows * n));
  const std::vector<int32_t> idx = {4, 0, 4, 5, 1, 4, 2};  // repeats: adds in row order
  const std::vector<float> scale = {0.5f, -1.0f, 0.25f, 2.0f, 1.0f, 0.125f, 3.0f};
  const int64_t M = static_cast<int64_t>(idx.size());

  std::vector<float> gathered(static_cast<size_t>(M * n));
  cpu_->gather_rows(x.data(), idx.data(), M, n, gathered.data());
  float* g = upload(std::vector<float>(gathered.size()));
  gpu_->gather_rows(upload(x), idx.data(), M, n, g);
  test::expect_close(download(g, gathered.size()), gathered, 0.0f, 0.0f, "gather_rows");

  const std::vector<float> src = randn(static_cast<size_t>(M * n));
  std::vector<float> want = x;
  cpu_->scatter_add_rows(want.data(), src.data(), idx.data(), scale.data(), M, n);
  float* y = upload(x);
  gpu_->scatter_add_rows(y, upload(src), idx.data(), scale.data(), M, n);
  test::expect_close(download(y, want.size()), want, 1e-6f, 1e-6f, "scatter_add_rows");
}

// Routing on the device picks the experts route_token() picks, in its order (random logits, and
// logits rounded to halves, where scores tie and the lower index comes first), with the same
// weights up to expf's rounding, for every scoring rule: DeepSeek-V3's group-limited choice
// (renormalised, times routed_scaling_factor) and per-expert scales (Gemma 4's) included.
// Expert counts on both sides of the kernel's register layouts (4, 8 and 32 per lane).
TEST_F(CudaOps, RouteMatchesHostRouting) {
  for (const int64_t E : {int64_t{40}, int64_t{128}, int64_t{256}, int64_t{300}, int64_t{384}})
    for (const bool ties : {false, true}) route_case(E, ties);
}

// With ties, the logits are rounded to halves: many experts share a score, and the lower index
// must come first.
void CudaOps::route_case(int64_t E, bool ties) {
  const int64_t M = 3, k = 6;
  std::vector<float> logits = randn(static_cast<size_t>(M * E), 2.0f);
  if (ties)
    for (float& x : logits) x = std::round(2.0f * x) / 2.0f;
  const std::vector<float> bias = randn(static_cast<size_t>(E), 0.3f);
  std::vector<float> expert_scale = randn(static_cast<size_t>(E), 0.5f);
  for (float& s : expert_scale) s = std::fabs(s) + 0.5f;
  struct Case {
    RouterScoring scoring;
    bool norm;
    bool biased;
    int64_t n_group = 1, topk_group = 1;
    float scale = 1.0f;
    bool expert_scaled = false;
  };
  for (const Case& c : {Case{RouterScoring::TopkSoftmax, false, false},
                        Case{RouterScoring::SoftmaxTopk, false, false},
                        Case{RouterScoring::SoftmaxTopk, true, false},
                        Case{RouterScoring::SoftmaxTopk, true, false, 1, 1, 1.0f, true},
                        Case{RouterScoring::SigmoidBiasTopk, true, true},
                        Case{RouterScoring::SigmoidBiasTopk, true, true, 1, 1, 2.5f, true},
                        Case{RouterScoring::SigmoidGroupTopk, true, true, 4, 2, 2.5f},
                        Case{RouterScoring::SigmoidGroupTopk, false, true, 8, 3},
                        Case{RouterScoring::SigmoidGroupTopk, true, true, 32, 4}}) {
    if (E % c.n_group != 0) continue;
    const std::string what = std::string(router_scoring_name(c.scoring)) + (c.norm ? " norm" : "") +
                             " of " + std::to_string(E) + " in " + std::to_string(c.n_group) +
                             " groups" + (c.expert_scaled ? ", scaled" : "") +
                             (ties ? " with ties" : "");
    std::vector<int32_t> want_ids(static_cast<size_t>(M * k));
    std::vector<float> want_w(want_ids.size());
    const RouterArgs host{c.scoring,
                          E,
                          k,
                          c.norm,
                          c.biased ? bias.data() : nullptr,
                          c.n_group,
                          c.topk_group,
                          c.scale,
                          c.expert_scaled ? expert_scale.data() : nullptr};
    for (int64_t m = 0; m < M; ++m)
      route_token(logits.data() + m * E, host, want_ids.data() + m * k, want_w.data() + m * k);
    RouterArgs dev = host;
    dev.bias = c.biased ? upload(bias) : nullptr;
    dev.expert_scale = c.expert_scaled ? upload(expert_scale) : nullptr;
    auto* ids = static_cast<int32_t*>(device_bytes(want_ids.size() * sizeof(int32_t)));
    float* w = upload(std::vector<float>(want_w.size()));
    gpu_->route(upload(logits), M, dev, ids, w);
    std::vector<int32_t> got_ids(want_ids.size());
    gpu_->to_host(got_ids.data(), ids, got_ids.size() * sizeof(int32_t));
    EXPECT_EQ(got_ids, want_ids) << what;
    // A softmax over all E experts sums E exponentials, in another order on each side: up to E
    // roundings of 2^-24 apart in its denominator.
    test::expect_close(download(w, want_w.size()), want_w, 0.0f,
                       1e-6f + static_cast<float>(E) * 0x1p-24f, what);
  }
}

// matmul_indexed runs the same GEMV kernels as a matmul per expert, and combine_experts the same
// multiply-adds as scatter_add_rows over a zeroed output in ascending id order: bit for bit. Two
// tokens of k = 3 experts, their inputs one shared row, a row per expert or a row per token.
TEST_F(CudaOps, IndexedExpertsBitIdenticalToPerExpertOps) {
  const int64_t E = 5, rows = 96, cols = 512, k = 3, M = 2;
  const std::vector<int32_t> ids = {3, 0, 4, 1, 3, 2};
  const int64_t n = static_cast<int64_t>(ids.size());
  const std::vector<float> scale = {0.5f, 0.3f, 0.2f, 0.6f, 0.25f, 0.15f};
  auto* d_ids = static_cast<int32_t*>(device_bytes(ids.size() * sizeof(int32_t)));
  gpu_->to_device(d_ids, ids.data(), ids.size() * sizeof(int32_t));
  struct Case {
    DType t;
    bool packed;  // in the backend's packed layout (q8_0: 4-row groups)
  };
  for (const auto& [t, packed] :
       {Case{DType::BF16, false}, Case{DType::Q8_0, false}, Case{DType::Q8_0, true},
        Case{DType::Q4_K, false}, Case{DType::Q5_K, false}, Case{DType::Q3_K, false},
        Case{DType::Q5_1, false}}) {
    const size_t stride = row_bytes(t, cols, "test");
    std::vector<Weight> experts;
    std::vector<const void*> table;
    for (int64_t e = 0; e < E; ++e) {
      experts.push_back(gpu_->upload_weight(t, rows, cols, stride,
                                            random_weight(t, rows, cols, stride, rng_).data()));
      if (packed) gpu_->pack_weight(experts.back());
      ASSERT_EQ(experts.back().layout == WeightLayout::Q8Groups, packed);
      table.push_back(experts.back().data);
    }
    auto* d_table = static_cast<const void**>(device_bytes(table.size() * sizeof(void*)));
    gpu_->to_device(d_table, table.data(), table.size() * sizeof(void*));
    const std::vector<float> x = randn(static_cast<size_t>(n * cols));
    const float* d_x = upload(x);
    for (const auto& [x_stride, per_x] :
         {std::pair{int64_t{0}, int64_t{1}}, std::pair{cols, int64_t{1}}, std::pair{cols, k}}) {
      const std::string what = std::string(dtype_name(t)) + (packed ? " packed" : "") +
                               " x_stride " + std::to_string(x_stride) + ", " +
                               std::to_string(per_x) + " experts a row";
      float* got = upload(std::vector<float>(static_cast<size_t>(n * rows)));
      gpu_->matmul_indexed(experts[0], d_table, d_ids, n, d_x, x_stride, per_x, got);
      float* want = upload(std::vector<float>(static_cast<size_t>(n * rows)));
      for (int64_t i = 0; i < n; ++i)
        gpu_->matmul(experts[static_cast<size_t>(ids[static_cast<size_t>(i)])],
                     d_x + i / per_x * x_stride, 1, want + i * rows);
      const std::vector<float> g = download(got, static_cast<size_t>(n * rows));
      const std::vector<float> w = download(want, static_cast<size_t>(n * rows));
      EXPECT_EQ(0, std::memcmp(g.data(), w.data(), g.size() * sizeof(float))) << what;
    }
    for (Weight& w : experts) gpu_->release_weight(w);
  }
  const std::vector<float> y = randn(static_cast<size_t>(n * rows));
  const float* d_y = upload(y);
  float* d_w = upload(scale);
  float* got = upload(std::vector<float>(M * rows));
  gpu_->combine_experts(d_y, d_ids, d_w, M, k, rows, got);
  float* want = upload(std::vector<float>(M * rows));
  gpu_->zero(want, M * rows);
  const int32_t row0 = 0;
  // Ascending ids: 0, 3, 4 for the first token, 1, 2, 3 for the second.
  for (const auto& [m, i] : {std::pair{0, 1}, std::pair{0, 0}, std::pair{0, 2}, std::pair{1, 3},
                             std::pair{1, 5}, std::pair{1, 4}})
    gpu_->scatter_add_rows(want + m * rows, d_y + static_cast<int64_t>(i) * rows, &row0,
                           &scale[static_cast<size_t>(i)], 1, rows);
  const std::vector<float> g = download(got, M * rows), w = download(want, M * rows);
  EXPECT_EQ(0, std::memcmp(g.data(), w.data(), g.size() * sizeof(float))) << "combine_experts";
  // The CPU backend's generic versions agree with the same per-expert ops.
  std::vector<float> cpu(static_cast<size_t>(M * rows));
  cpu_->combine_experts(y.data(), ids.data(), scale.data(), M, k, rows, cpu.data());
  test::expect_close(cpu, w, 1e-6f, 1e-6f, "cpu combine_experts");
}

// combine_add_rms_norm sums the routed rows in the norm's kernel (a row of 2048) or falls back to
// combine_experts then add_rms_norm (a row of 999): the same bits either way, and the CPU
// backend's default agrees.
TEST_F(CudaOps, CombineAddRmsNormBitIdenticalToCombineThenAddNorm) {
  const int64_t M = 2, k = 3;
  const std::vector<int32_t> ids = {3, 0, 4, 1, 3, 2};
  const std::vector<float> scale = {0.5f, 0.3f, 0.2f, 0.6f, 0.25f, 0.15f};
  auto* d_ids = static_cast<int32_t*>(device_bytes(ids.size() * sizeof(int32_t)));
  gpu_->to_device(d_ids, ids.data(), ids.size() * sizeof(int32_t));
  const float* d_scale = upload(scale);
  for (const int64_t n : {int64_t{2048}, int64_t{999}}) {
    const size_t N = static_cast<size_t>(M * n);
    const std::vector<float> x = randn(N, 3.0f), y = randn(N * k),
                             w = randn(static_cast<size_t>(n));
    const float *d_y = upload(y), *d_w = upload(w);
    float *x1 = upload(x), *sum1 = upload(std::vector<float>(N)),
          *out1 = upload(std::vector<float>(N));
    gpu_->combine_add_rms_norm(d_y, d_ids, d_scale, k, x1, d_w, M, n, 1e-6f, true, sum1, out1);
    float *x2 = upload(x), *sum2 = upload(std::vector<float>(N)),
          *out2 = upload(std::vector<float>(N));
    gpu_->combine_experts(d_y, d_ids, d_scale, M, k, n, sum2);
    gpu_->add_rms_norm(x2, sum2, d_w, M, n, 1e-6f, true, out2);
    const std::vector<float> a = download(x1, N), b = download(x2, N);
    const std::vector<float> na = download(out1, N), nb = download(out2, N);
    for (size_t i = 0; i < N; ++i) {
      ASSERT_EQ(a[i], b[i]) << "residual " << i << " (n " << n << ")";
      ASSERT_EQ(na[i], nb[i]) << "norm " << i << " (n " << n << ")";
    }
    std::vector<float> cpu_x = x, cpu_sum(N), cpu_out(N);
    cpu_->combine_add_rms_norm(y.data(), ids.data(), scale.data(), k, cpu_x.data(), w.data(), M, n,
                               1e-6f, true, cpu_sum.data(), cpu_out.data());
    test::expect_close(nb, cpu_out, 1e-6f, 1e-5f, "combine_add_rms_norm");
  }
}

// Expert paging: the page/commit kernels make the decisions of the host default (the one rule of
// expert_paging.h) step after step, and the filling GEMV stores exactly the weight bytes it reads
// from pinned host memory into the slot, with the bits of matmul_indexed.
TEST_F(CudaOps, ExpertPagingKernelsMatchTheHostRuleAndFillSlots) {
  const int64_t E = 12, S = 4, k = 3, rows = 64, cols = 256;
  const size_t stride = row_bytes(DType::BF16, cols, "test"), bytes = rows * stride;
  // Every expert's bytes in pinned host memory; slots in VRAM.
  std::vector<void*> host(static_cast<size_t>(E));
  for (void*& h : host) {
    h = gpu_->alloc_host_pinned(bytes);
    const std::vector<uint8_t> w = random_weight(DType::BF16, rows, cols, stride, rng_);
    std::memcpy(h, w.data(), bytes);
  }
  std::vector<void*> slots(static_cast<size_t>(S));
  for (void*& s : slots) s = device_bytes(bytes);
  // Two copies of the state: one paged by the kernels, one by the host default.
  const auto make = [&] {
    ExpertPages p;
    p.n_expert = E;
    p.n_slots = S;
    const auto put = [&](const auto& v) {
      using T = typename std::decay_t<decltype(v)>::value_type;
      void* d = device_bytes(v.size() * sizeof(T));
      gpu_->to_device(d, v.data(), v.size() * sizeof(T));
      return static_cast<T*>(d);
    };
    p.slot_of = put(std::vector<int32_t>(E, -1));
    p.owner = put(std::vector<int32_t>(S, -1));
    p.stamp = put(std::vector<uint32_t>(S + 1, 0));
    p.counts = put(std::vector<uint64_t>(2, 0));
    p.host = put(std::vector<const void*>(host.begin(), host.end()));
    p.slot = put(slots);
    std::vector<const void*> table(static_cast<size_t>(3 * E));
    for (int64_t e = 0; e < E; ++e)
      for (int j = 0; j < 3; ++j) table[static_cast<size_t>(j * E + e)] = host[e];
    p.table = put(table);
    p.fill = put(std::vector<void*>(static_cast<size_t>(3 * E), nullptr));
    return p;
  };
  const ExpertPages a = make(), b = make();
  // The state as numbers; a pointer as the host copy (e) or slot (E + s) it points at, -1 null.
  const auto where = [&](const void* q) -> int64_t {
    for (int64_t e = 0; e < E; ++e)
      if (q == host[static_cast<size_t>(e)]) return e;
    for (int64_t i = 0; i < S; ++i)
      if (q == slots[static_cast<size_t>(i)]) return E + i;
    return q == nullptr ? -1 : -2;
  };
  const auto state = [&](const ExpertPages& p) {
    std::vector<int64_t> out;
    const auto add = [&](const auto* d, size_t n) {
      std::vector<std::remove_cv_t<std::remove_pointer_t<decltype(d)>>> v(n);
      gpu_->to_host(v.data(), d, n * sizeof(v[0]));
      for (const auto& x : v) {
        if constexpr (std::is_pointer_v<std::decay_t<decltype(x)>>) {
          out.push_back(where(x));
        } else {
          out.push_back(static_cast<int64_t>(x));
        }
      }
    };
    add(p.slot_of, E);
    add(p.owner, S);
    add(p.stamp, S + 1);
    add(p.counts, 2);
    add(p.table, 3 * E);
    add(p.fill, 3 * E);
    return out;
  };
  const Weight shape{DType::BF16, rows, cols, stride, host[0]};
  const std::vector<float> x = randn(cols);
  const float* d_x = upload(x);
  float* got = upload(std::vector<float>(k * rows));
  float* want = upload(std::vector<float>(k * rows));
  auto* d_ids = static_cast<int32_t*>(device_bytes(k * sizeof(int32_t)));
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(E - 1));
  for (int step = 0; step < 20; ++step) {
    std::vector<int32_t> ids;
    while (static_cast<int64_t>(ids.size()) < k) {
      const int32_t e = pick(rng_);
      if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
    }
    gpu_->to_device(d_ids, ids.data(), k * sizeof(int32_t));
    gpu_->page_experts(a, d_ids, k);
    gpu_->Backend::page_experts(b, d_ids, k);
    ASSERT_EQ(state(a), state(b)) << "after paging, step " << step;
    gpu_->matmul_indexed_filling(shape, a.table, a.fill, d_ids, k, d_x, 0, 1, got);
    gpu_->matmul_indexed(shape, a.table, d_ids, k, d_x, 0, 1, want);
    const std::vector<float> g = download(got, k * rows), w = download(want, k * rows);
    ASSERT_EQ(0, std::memcmp(g.data(), w.data(), g.size() * sizeof(float))) << "step " << step;
    gpu_->commit_experts(a, d_ids, k);
    gpu_->Backend::commit_experts(b, d_ids, k);
    ASSERT_EQ(state(a), state(b)) << "after the commit, step " << step;
    // Each routed expert now reads from a slot that holds its bytes.
    std::vector<const void*> t(3 * E);
    gpu_->to_host(t.data(), a.table, t.size() * sizeof(void*));
    std::vector<uint8_t> in_slot(bytes);
    for (const int32_t e : ids) {
      gpu_->to_host(in_slot.data(), t[static_cast<size_t>(e)], bytes);
      ASSERT_EQ(0, std::memcmp(in_slot.data(), host[e], bytes))
          << "expert " << e << ", step " << step;
    }
  }
  for (void* h : host) gpu_->free_host_pinned(h);
}

// The angle is the same f32 product on both sides; sin/cos differ by at most 2 ulp (CUDA) against
// glibc, so the rotated values agree to a few 1e-7 of their magnitude.
TEST_F(CudaOps, RopeNeoxAdjacentAndPartial) {
  const int64_t M = 4, heads = 3, hd = 128;
  const std::vector<int32_t> pos = {0, 7, 1000, 5001};
  for (bool neox : {true, false}) {
    for (int64_t rot : {hd, int64_t{64}}) {
      std::vector<float> inv(static_cast<size_t>(rot / 2));
      for (int64_t i = 0; i < rot / 2; ++i)
        inv[i] = std::pow(10000.0f, -2.0f * i / static_cast<float>(rot));
      std::vector<float> x = randn(static_cast<size_t>(M * heads * hd));
      float* dx = upload(x);
      gpu_->rope(dx, M, heads, pos.data(), RopeArgs{hd, rot, neox, upload(inv)});
      cpu_->rope(x.data(), M, heads, pos.data(), RopeArgs{hd, rot, neox, inv.data()});
      test::expect_close(download(dx, x.size()), x, 2e-6f, 2e-6f, "rope");
    }
  }
}

// Prefill takes row kernels for glu (16-byte vectors) and rope (angles shared by a row's heads):
// the same bits as one row at a time, which decode takes.
TEST_F(CudaOps, PrefillRowKernelsBitIdenticalToOneRowAtATime) {
  const int64_t M = 5, n = 1024;
  const std::vector<float> gu = randn(static_cast<size_t>(M * 2 * n), 2.0f);
  const float* d_gu = upload(gu);
  for (Glu act : {Glu::SiLU, Glu::GeluTanh}) {
    float* all = upload(std::vector<float>(static_cast<size_t>(M * n)));
    float* one = upload(std::vector<float>(static_cast<size_t>(M * n)));
    gpu_->glu(act, d_gu, d_gu + n, M, n, 2 * n, all);
    for (int64_t m = 0; m < M; ++m)
      gpu_->glu(act, d_gu + m * 2 * n, d_gu + m * 2 * n + n, 1, n, 2 * n, one + m * n);
    const std::vector<float> a = download(all, static_cast<size_t>(M * n)),
                             b = download(one, a.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << (act == Glu::SiLU ? "swiglu" : "geglu");
  }
  const int64_t heads = 5, hd = 128;
  const std::vector<int32_t> pos = {3, 0, 700, 4096, 9};
  for (bool neox : {true, false}) {
    std::vector<float> inv(static_cast<size_t>(hd / 2));
    for (int64_t i = 0; i < hd / 2; ++i)
      inv[static_cast<size_t>(i)] = std::pow(500000.0f, -2.0f * i / static_cast<float>(hd));
    const RopeArgs r{hd, hd, neox, upload(inv)};
    const std::vector<float> x = randn(static_cast<size_t>(M * heads * hd));
    float* all = upload(x);
    float* one = upload(x);
    gpu_->rope(all, M, heads, pos.data(), r);
    for (int64_t m = 0; m < M; ++m) gpu_->rope(one + m * heads * hd, 1, heads, &pos[m], r);
    const std::vector<float> a = download(all, x.size()), b = download(one, x.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << "rope, neox " << neox;
  }
}

// M-RoPE (Qwen3-VL's interleaved sections): each pair rotated by its stream's position of the
// row's three (T, H, W) as the CPU does it, in the row kernel (prefill) and the per-head kernel
// (decode, a row at a time); with the three positions equal, the bits of ordinary rope.
TEST_F(CudaOps, MRopeThreeStreamsAgainstCpuAndOrdinaryWhenEqual) {
  const int64_t M = 5, heads = 3, hd = 128;
  ArchConfig c;
  c.rotary_dim = hd;
  c.mrope_sections = {24, 20, 20};
  c.mrope_interleaved = true;
  const std::vector<uint8_t> streams = mrope_pair_streams(c);
  std::vector<float> inv(static_cast<size_t>(hd / 2));
  for (int64_t i = 0; i < hd / 2; ++i)
    inv[static_cast<size_t>(i)] = std::pow(5e6f, -2.0f * i / static_cast<float>(hd));
  const std::vector<int32_t> pos = {0, 8, 8, 11, 4095};
  std::vector<int32_t> pos3, equal3;
  for (int64_t m = 0; m < M; ++m) {
    const int32_t p = pos[static_cast<size_t>(m)];
    pos3.insert(pos3.end(), {p, p + static_cast<int32_t>(m % 2), p + static_cast<int32_t>(m % 3)});
    equal3.insert(equal3.end(), {p, p, p});
  }
  const size_t n = static_cast<size_t>(M * heads * hd), row = static_cast<size_t>(heads * hd);
  for (const bool neox : {true, false}) {
    const RopeArgs r{hd, hd, neox, upload(inv)};
    RopeArgs rm = r;
    rm.pair_stream = streams.data();
    const RopeArgs cpu_rm{hd, hd, neox, inv.data(), streams.data()};
    const std::vector<float> x = randn(n);
    std::vector<float> want = x;
    cpu_->rope(want.data(), M, heads, pos3.data(), cpu_rm);
    // x rotated on the GPU by M-RoPE: all rows in one call (the row kernel) or a row at a time.
    const auto mrope = [&](const std::vector<int32_t>& positions, bool all_rows) {
      float* d = upload(x);
      if (all_rows) gpu_->rope(d, M, heads, positions.data(), rm);
      for (int64_t m = 0; !all_rows && m < M; ++m)
        gpu_->rope(d + m * heads * hd, 1, heads, &positions[static_cast<size_t>(3 * m)], rm);
      return download(d, n);
    };
    const std::vector<float> a = mrope(pos3, true), b = mrope(pos3, false);
    test::expect_close(a, want, 2e-6f, 2e-6f, neox ? "m-rope rows, neox" : "m-rope rows");
    test::expect_close(b, want, 2e-6f, 2e-6f, neox ? "m-rope a row, neox" : "m-rope a row");
    // The H and W positions differ from T on some rows: those rows differ from ordinary rope.
    float* plain = upload(x);
    gpu_->rope(plain, M, heads, pos.data(), r);
    const std::vector<float> p = download(plain, n);
    EXPECT_NE(0, std::memcmp(a.data() + row, p.data() + row, row * sizeof(float)))
        << "row 1's H position did not change it";
    // Equal streams: ordinary rope, bit for bit, in both kernels.
    const std::vector<float> ea = mrope(equal3, true), eo = mrope(equal3, false);
    EXPECT_EQ(0, std::memcmp(ea.data(), p.data(), n * sizeof(float)))
        << "equal streams, rows kernel, neox " << neox << ": max rel diff "
        << test::max_rel_error(ea, p);
    EXPECT_EQ(0, std::memcmp(eo.data(), p.data(), n * sizeof(float)))
        << "equal streams, per-head kernel, neox " << neox << ": max rel diff "
        << test::max_rel_error(eo, p);
  }
}

struct KvPair {
  KvView cpu, gpu;
  std::vector<uint8_t> cpu_k, cpu_v;
};

KvPair make_kv(Backend& gpu, DType dtype, int64_t capacity, int64_t width) {
  KvPair kv;
  const size_t rb = row_bytes(dtype, static_cast<uint64_t>(width), "kv");
  kv.cpu_k.assign(static_cast<size_t>(capacity) * rb, 0);
  kv.cpu_v.assign(kv.cpu_k.size(), 0);
  kv.cpu = KvView{dtype, capacity, width, rb, kv.cpu_k.data(), kv.cpu_v.data()};
  kv.gpu =
      KvView{dtype, capacity, width, rb, gpu.alloc(kv.cpu_k.size()), gpu.alloc(kv.cpu_v.size())};
  return kv;
}

// Cache rows 0 .. fill - 1 of both sides get the same random k and v rows.
void CudaOps::fill_kv(KvPair& kv, int64_t fill) {
  const size_t n = static_cast<size_t>(fill * kv.cpu.width);
  store_kv(kv, randn(n), randn(n));
}

// Cache rows 0 .. k.size() / width - 1 of both sides take the rows of k and v.
void CudaOps::store_kv(KvPair& kv, const std::vector<float>& k, const std::vector<float>& v) {
  const auto fill = static_cast<int64_t>(k.size()) / kv.cpu.width;
  std::vector<int32_t> rows(static_cast<size_t>(fill));
  std::iota(rows.begin(), rows.end(), 0);
  cpu_->kv_store(kv.cpu, k.data(), v.data(), fill, rows.data());
  gpu_->kv_store(kv.gpu, upload(k), upload(v), fill, rows.data());
}

// Attention of q's rows at pos over kv on both backends, {cuda, cpu}; args.sinks in host memory
// (uploaded for the GPU).
std::pair<std::vector<float>, std::vector<float>> CudaOps::attend_both(
    const std::vector<float>& q, const KvPair& kv, const std::vector<int32_t>& pos,
    AttentionArgs args) {
  const auto M = static_cast<int64_t>(pos.size());
  std::vector<float> want(q.size());
  cpu_->attention(q.data(), kv.cpu, M, pos.data(), args, want.data());
  float* out = upload(std::vector<float>(q.size()));
  if (args.sinks != nullptr)
    args.sinks = upload(std::vector<float>(args.sinks, args.sinks + args.n_head));
  gpu_->attention(upload(q), kv.gpu, M, pos.data(), args, out);
  return {download(out, q.size()), want};
}

const DType kKvTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

// Both sides convert the same f32 values with the same rounding (RNE halves, GGML q8_0 with
// x * (1 / d) rounded half away from zero): the cache bytes must be identical.
TEST_F(CudaOps, KvStoreBytesMatchCpu) {
  for (DType dt : kKvTypes) {
    const int64_t cap = 16, width = 4 * 64, M = 5;
    KvPair kv = make_kv(*gpu_, dt, cap, width);
    const std::vector<float> k = randn(static_cast<size_t>(M * width)),
                             v = randn(static_cast<size_t>(M * width));
    const std::vector<int32_t> pos = {3, 0, 15, 7, 8};
    cpu_->kv_store(kv.cpu, k.data(), v.data(), M, pos.data());
    gpu_->kv_store(kv.gpu, upload(k), upload(v), M, pos.data());
    std::vector<uint8_t> gk(kv.cpu_k.size()), gv(kv.cpu_v.size());
    gpu_->to_host(gk.data(), kv.gpu.k, gk.size());
    gpu_->to_host(gv.data(), kv.gpu.v, gv.size());
    EXPECT_EQ(gk, kv.cpu_k) << dtype_name(dt);
    EXPECT_EQ(gv, kv.cpu_v) << dtype_name(dt);
    EXPECT_THROW(gpu_->kv_store(kv.gpu, upload(k), upload(v), 1, std::vector<int32_t>{16}.data()),
                 Error);
    gpu_->free(kv.gpu.k);
    gpu_->free(kv.gpu.v);
  }
}

// rope_kv_store is rms_norm_heads on the q and k heads (given their weights), rope on both and
// kv_store of k and v, in one kernel or two: the same bits (head sizes 64, 128, 256, the last
// partly rotated; both pairings; every cache type), and the CPU backend's ops agree.
TEST_F(CudaOps, RopeKvStoreBitIdenticalToSeparateOps) {
  const int64_t n_q = 6, n_k = 2, capacity = 4100;
  const int32_t pos = 4099;
  for (const int64_t hd : {int64_t{64}, int64_t{128}, int64_t{256}})
    for (const bool neox : {true, false}) {
      const int64_t rot = hd == 256 ? hd / 2 : hd;
      std::vector<float> inv(static_cast<size_t>(rot / 2));
      for (int64_t i = 0; i < rot / 2; ++i)
        inv[i] = std::pow(10000.0f, -2.0f * i / static_cast<float>(rot));
      const RopeArgs r{hd, rot, neox, upload(inv)};
      const std::vector<float> qkv = randn(static_cast<size_t>((n_q + 2 * n_k) * hd), 2.0f);
      const std::vector<float> qw = randn(static_cast<size_t>(hd)), kw = randn(qw.size());
      const float *dqw = upload(qw), *dkw = upload(kw);
      for (const int norm : {0, 1, 2})  // none, w, 1 + w
        for (const DType t : kKvTypes) {
          const std::string what = "head_dim " + std::to_string(hd) + (neox ? " neox" : "") +
                                   " norm " + std::to_string(norm) + " " + dtype_name(t);
          const float* w_q = norm > 0 ? dqw : nullptr;
          const float* w_k = norm > 0 ? dkw : nullptr;
          KvPair one = make_kv(*gpu_, t, capacity, n_k * hd),
                 apart = make_kv(*gpu_, t, capacity, n_k * hd);
          float* fused = upload(qkv);
          gpu_->rope_kv_store(fused, w_q, w_k, n_q, n_k, 1e-6f, norm == 2, &pos, r, one.gpu);
          float* ops = upload(qkv);
          if (norm > 0) {
            gpu_->rms_norm_heads(ops, dqw, 1, n_q, hd, 1e-6f, norm == 2);
            gpu_->rms_norm_heads(ops + n_q * hd, dkw, 1, n_k, hd, 1e-6f, norm == 2);
          }
          gpu_->rope(ops, 1, n_q + n_k, &pos, r);
          gpu_->kv_store(apart.gpu, ops + n_q * hd, ops + (n_q + n_k) * hd, 1, &pos);
          const std::vector<float> a = download(fused, qkv.size()), b = download(ops, qkv.size());
          for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << what << ", element " << i;
          const size_t rb = one.gpu.row_bytes, at = static_cast<size_t>(pos) * rb;
          for (const auto& [x, y] :
               {std::pair{one.gpu.k, apart.gpu.k}, std::pair{one.gpu.v, apart.gpu.v}}) {
            std::vector<uint8_t> gx(rb), gy(rb);
            gpu_->to_host(gx.data(), static_cast<uint8_t*>(x) + at, rb);
            gpu_->to_host(gy.data(), static_cast<uint8_t*>(y) + at, rb);
            EXPECT_EQ(gx, gy) << what << (x == one.gpu.k ? ", k row" : ", v row");
          }
          std::vector<float> cpu = qkv;
          cpu_->rope_kv_store(cpu.data(), norm > 0 ? qw.data() : nullptr,
                              norm > 0 ? kw.data() : nullptr, n_q, n_k, 1e-6f, norm == 2, &pos,
                              RopeArgs{hd, rot, neox, inv.data()}, one.cpu);
          test::expect_close(a, cpu, 2e-6f, 1e-5f, what);
          for (KvPair* kv : {&one, &apart}) {
            gpu_->free(kv->gpu.k);
            gpu_->free(kv->gpu.v);
          }
        }
    }
}

struct AttnCase {
  int64_t n_head, n_head_kv, head_dim;
  float softcap;
  int64_t window;
  std::vector<int32_t> pos;  // one query row per entry
};

// Both backends read the same cache entries and compute in f32; only summation order and the
// exp/tanh implementations differ (softmax weights to ~1e-6 relative), and the output is a convex
// combination of N(0, 1) values: 2e-5 absolute holds them together.
TEST_F(CudaOps, AttentionDecodeAndPrefillEveryKvType) {
  std::vector<int32_t> prefill(40);
  for (int i = 0; i < 40; ++i) prefill[static_cast<size_t>(i)] = 200 + i;
  const AttnCase cases[] = {
      {8, 2, 64, 0.0f, 0, {0}},
      {8, 2, 128, 0.0f, 0, {777}},                    // decode over many splits
      {8, 2, 128, 0.0f, 0, {20}},                     // decode over fewer keys than ranges
      {16, 2, 128, 0.0f, 0, {700}},                   // decode, eight query heads a kv head
      {8, 4, 256, 0.0f, 0, {400}},                    // decode, two heads of 256 a kv head
      {16, 2, 96, 0.0f, 0, {333}},                    // decode, partial lanes, eight heads
      {4, 4, 256, 50.0f, 0, {300}},                   // softcap, head_dim 256
      {6, 2, 80, 0.0f, 64, {500}},                    // sliding window, head_dim not a power of two
      {8, 2, 128, 0.0f, 0, prefill},                  // prefill, two query tiles
      {4, 1, 64, 30.0f, 100, prefill},                // prefill with window and softcap
      {4, 2, 32, 0.0f, 0, {5, 90, 3, 600, 600, 17}},  // scattered positions in one tile
  };
  const int64_t cap = 800;
  for (DType dt : kKvTypes) {
    for (const AttnCase& c : cases) {
      const int64_t width = c.n_head_kv * c.head_dim;
      if (dt == DType::Q8_0 && c.head_dim % kQK32 != 0) continue;  // heads must be whole blocks
      const bool tensor_cores = (dt == DType::F16 || dt == DType::BF16) &&
                                (c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256);
      if (c.pos.size() > 1 && tensor_cores)
        continue;  // rounds Q and P: AttentionPrefillTensorCores
      KvPair kv = make_kv(*gpu_, dt, cap, width);
      const int64_t fill = 1 + *std::max_element(c.pos.begin(), c.pos.end());
      fill_kv(kv, fill);

      const int64_t M = static_cast<int64_t>(c.pos.size());
      const std::vector<float> q = randn(static_cast<size_t>(M * c.n_head * c.head_dim));
      // Without and with a sink per query head (gpt-oss), of the scores' size.
      const std::vector<float> sinks = randn(static_cast<size_t>(c.n_head), 2.0f);
      for (bool sink : {false, true}) {
        AttentionArgs args{c.n_head,   c.n_head_kv,
                           c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                           c.softcap,  c.window};
        args.sinks = sink ? sinks.data() : nullptr;
        const auto [got, want] = attend_both(q, kv, c.pos, args);
        test::expect_close(got, want, 2e-5f, 0.0f,
                           std::string("attention ") + dtype_name(dt) +
                               " hd=" + std::to_string(c.head_dim) + " M=" + std::to_string(M) +
                               (sink ? " sinks" : ""));
      }
      gpu_->free(kv.gpu.k);
      gpu_->free(kv.gpu.v);
    }
  }
}

// Queries and keys whose scores are exact in f32 whatever the order of the sums: q in
// {-2 .. 2} / 8; k in {0, +-64, +-127} / 512 with +-127 / 512 first in each 32 values, so that a
// q8_0 block's scale is exactly 2^-9 and every cache type holds k exactly. Products are multiples
// of 2^-12 below 2^-4 and a head of 576 sums fewer than 2^24 of them; with a scale of 1/2 the
// backends' scores are the same bits, and what is left between them is the exp / tanh
// implementations and the softmax's summation order (V is N(0, 1)), as in
// AttentionDecodeAndPrefillEveryKvType.
std::vector<float> exact_queries(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> q(-2, 2);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(q(rng)) / 8.0f;
  return v;
}

std::vector<float> exact_keys(size_t n, std::mt19937& rng) {
  const float levels[] = {-127, -64, 0, 64, 127};
  std::uniform_int_distribution<int> pick(0, 4);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = (i % kQK32 == 0 ? (pick(rng) < 2 ? -127.0f : 127.0f) : levels[pick(rng)]) / 512.0f;
  return v;
}

// The largest |got - want| of an attention output [rows][n_head][D], and where, for a message.
struct WorstDiff {
  double diff = 0;
  std::string where;
};

WorstDiff worst_diff(const std::vector<float>& got, const std::vector<float>& want, int64_t n_head,
                     int64_t D) {
  size_t at = 0;
  double diff = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= diff)) diff = std::fabs(got[i] - want[i]), at = i;
  const auto i = static_cast<int64_t>(at);
  return {diff, "max |cuda - cpu| " + std::to_string(diff) + " at row " +
                    std::to_string(i / (n_head * D)) + " head " + std::to_string(i / D % n_head) +
                    " dim " + std::to_string(i % D) + " (cuda " + std::to_string(got[at]) +
                    ", cpu " + std::to_string(want[at]) + ")"};
}

struct WideCase {
  int64_t n_head, n_head_kv, head_dim;
  float softcap;
  int64_t window;
  std::vector<int32_t> pos;      // one query row per entry
  std::vector<int32_t> key_end;  // per row (AttentionArgs::key_end), or empty: causal
};

// Heads wider than 256 (MLA's absorbed rows of kv_lora_rank 512 + rope 64, read as key and value;
// Gemma 4's global heads of 512) in decode and prefill, and rows that see later keys up to their
// key_end (Gemma 3's images) in every kernel but the tensor cores' (AttentionPrefillTensorCores):
// the CPU backend's results, every cache type, with and without sinks. The bound is that of
// AttentionDecodeAndPrefillEveryKvType: the scores are the same bits (exact_queries).
TEST_F(CudaOps, AttentionWideHeadsAndKeyEndAgainstCpu) {
  std::vector<int32_t> rows(40), image(40, 0);
  std::iota(rows.begin(), rows.end(), 200);
  for (int i = 10; i < 30; ++i) image[static_cast<size_t>(i)] = 230;  // rows 210 .. 229
  const WideCase cases[] = {
      {16, 1, 576, 0.0f, 0, {700}, {}},             // MLA decode, many ranges, two heads a block
      {16, 1, 576, 0.0f, 0, {20}, {}},              // one range, a block per head
      {16, 1, 576, 0.0f, 0, {300}, {340}},          // one row that sees 40 later keys
      {8, 2, 512, 30.0f, 0, {600}, {}},             // Gemma 4's global heads, softcap, four a block
      {4, 2, 512, 0.0f, 64, {500}, {}},             // sliding window
      {6, 2, 320, 0.0f, 0, {333}, {}},              // a run of 256 and one partly used
      {4, 2, 128, 0.0f, 0, {300}, {340}},           // decode of a narrow head with key_end
      {16, 1, 576, 0.0f, 0, rows, {}},              // prefill of wide heads (a row at a time)
      {16, 1, 576, 0.0f, 0, rows, image},           // with an image of 20 rows
      {8, 2, 512, 30.0f, 100, rows, image},         // window and softcap with an image
      {8, 2, 128, 0.0f, 0, rows, image},            // the tiled kernel with an image
      {4, 1, 64, 20.0f, 16, rows, image},           // window shorter than the image
      {4, 2, 32, 0.0f, 0, {5, 90, 3}, {9, 0, 95}},  // scattered rows, ends past other rows'
  };
  const int64_t cap = 800;
  for (DType dt : kKvTypes)
    for (const WideCase& c : cases) {
      const auto M = static_cast<int64_t>(c.pos.size());
      const bool tensor_cores = (dt == DType::F16 || dt == DType::BF16) &&
                                (c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256);
      if (M > 1 && tensor_cores) continue;  // rounds Q and P: AttentionPrefillTensorCores
      const int64_t width = c.n_head_kv * c.head_dim;
      int64_t fill = 1 + *std::max_element(c.pos.begin(), c.pos.end());
      for (const int32_t e : c.key_end) fill = std::max<int64_t>(fill, e);
      KvPair kv = make_kv(*gpu_, dt, cap, width);
      store_kv(kv, exact_keys(static_cast<size_t>(fill * width), rng_),
               randn(static_cast<size_t>(fill * width)));
      const std::vector<float> q =
          exact_queries(static_cast<size_t>(M * c.n_head * c.head_dim), rng_);
      const std::vector<float> sinks = randn(static_cast<size_t>(c.n_head), 2.0f);
      for (const bool sink : {false, true}) {
        const std::string what =
            std::string(dtype_name(dt)) + " heads " + std::to_string(c.n_head) + "/" +
            std::to_string(c.n_head_kv) + " of " + std::to_string(c.head_dim) + ", " +
            std::to_string(M) + " rows from position " + std::to_string(c.pos[0]) +
            (c.key_end.empty() ? "" : ", key_end") + (c.window > 0 ? ", window" : "") +
            (c.softcap > 0 ? ", softcap" : "") + (sink ? ", sinks" : "");
        AttentionArgs args{c.n_head, c.n_head_kv, c.head_dim, 0.5f, c.softcap, c.window};
        args.key_end = c.key_end.empty() ? nullptr : c.key_end.data();
        args.sinks = sink ? sinks.data() : nullptr;
        const auto [got, want] = attend_both(q, kv, c.pos, args);
        const WorstDiff w = worst_diff(got, want, c.n_head, c.head_dim);
        EXPECT_LE(w.diff, 2e-5) << what << ": " << w.where;
      }
      gpu_->free(kv.gpu.k);
      gpu_->free(kv.gpu.v);
    }
}

// The open-time check (the scratch plan) takes the real wide shapes (DeepSeek-V3's 128 heads over
// one latent row of 576, Gemma 4's heads of 512) and refuses a head past the kernels' 576.
TEST_F(CudaOps, ScratchPlanTakesHeadsUpTo576) {
  ScratchPlan plan;
  plan.n_layer = 4, plan.max_rows = 64, plan.decode_step_rows = 1;
  for (const auto& [heads, kv_heads, dim] : {std::tuple{128, 1, 576}, std::tuple{32, 4, 512}}) {
    plan.n_head = heads, plan.n_head_kv = kv_heads, plan.head_dim = dim;
    EXPECT_GT(gpu_->scratch_bytes(plan), cuda::attention_decode_scratch_bytes(heads, 1, dim))
        << dim;
  }
  plan.n_head = 16, plan.n_head_kv = 1, plan.head_dim = 584;
  try {
    gpu_->scratch_bytes(plan);
    ADD_FAILURE() << "head_dim 584 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 584 exceeds the CUDA kernels' 576"),
              std::string::npos)
        << e.what();
  }
}

// A norm, GLU or decode attention whose output int8 GEMVs have read writes it quantised too, and
// the GEMV right after reads that instead of quantising the buffer again: the same bits as
// quantising in the GEMV (the first use of a buffer, before the backend knows an int8 GEMV reads
// it). To see that the second GEMV does take the producer's form, the buffer is zeroed behind the
// backend's back in between. Work done through the backend on the buffer in between (a launch, a
// memset) makes the GEMV quantise what the buffer then holds.
TEST_F(CudaOps, ProducersQuantiseTheInt8GemvInput) {
  const int64_t n = 1024, rows = 96;
  for (const DType t : {DType::Q8_0, DType::Q4_K}) {
    PackedPair p = upload_packed(t, rows, n);
    const Weight& w = t == DType::Q8_0 ? p.packed : p.rows;
    const int sm_major = [] {
      int major = 0;
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
      return major;
    }();
    ASSERT_TRUE(cuda::gemv_int8_supported(w, sm_major)) << dtype_name(t);
    for (const int64_t M : {int64_t{1}, int64_t{3}}) {
      const std::vector<float> xs = randn(static_cast<size_t>(M * n), 3.0f);
      const float* x = upload(xs);
      const float* res = upload(randn(xs.size()));
      const float* nw = upload(randn(static_cast<size_t>(n)));
      const float* gate = upload(randn(xs.size()));
      const float* up = upload(randn(xs.size()));
      // Each producer twice into a fresh buffer: the first GEMV learns that it reads the buffer,
      // the second finds it quantised by the producer.
      const auto twice = [&](float* out, const std::function<void(float*)>& produce,
                             const char* what) {
        std::vector<float> y[2];
        for (int round = 0; round < 2; ++round) {
          float* yd = upload(std::vector<float>(static_cast<size_t>(M * rows)));
          produce(out);
          if (round == 1) {
            gpu_->synchronize();
            ASSERT_EQ(cudaMemset(out, 0, xs.size() * sizeof(float)), cudaSuccess);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          }
          gpu_->matmul(w, out, M, yd);
          y[round] = download(yd, static_cast<size_t>(M * rows));
        }
        for (size_t i = 0; i < y[0].size(); ++i)
          ASSERT_EQ(y[0][i], y[1][i]) << what << " " << dtype_name(t) << " M=" << M << " " << i;
      };
      float* normed = upload(std::vector<float>(xs.size()));
      twice(
          normed, [&](float* out) { gpu_->rms_norm(x, nw, M, n, 1e-6f, false, out); }, "rms_norm");
      float* xa = upload(xs);
      float* added = upload(std::vector<float>(xs.size()));
      twice(
          added,
          [&](float* out) {
            gpu_->to_device(xa, xs.data(), xs.size() * sizeof(float));  // the residual adds up
            gpu_->add_rms_norm(xa, res, nw, M, n, 1e-6f, true, out);
          },
          "add_rms_norm");
      float* act = upload(std::vector<float>(xs.size()));
      twice(
          act, [&](float* out) { gpu_->glu(Glu::SiLU, gate, up, M, n, n, out); }, "glu");
      const int64_t k = 2;
      const float* routed = upload(randn(static_cast<size_t>(k) * xs.size()));
      const std::vector<int32_t> ids_h = {5, 1, 0, 7, 2, 3};
      auto* ids = static_cast<int32_t*>(device_bytes(ids_h.size() * sizeof(int32_t)));
      gpu_->to_device(ids, ids_h.data(), ids_h.size() * sizeof(int32_t));
      const float* routed_w = upload(randn(ids_h.size()));
      float* xc = upload(xs);
      float* sum = upload(std::vector<float>(xs.size()));
      float* combined = upload(std::vector<float>(xs.size()));
      twice(
          combined,
          [&](float* out) {
            gpu_->to_device(xc, xs.data(), xs.size() * sizeof(float));
            gpu_->combine_add_rms_norm(routed, ids, routed_w, k, xc, nw, M, n, 1e-6f, false, sum,
                                       out);
          },
          "combine_add_rms_norm");

      if (M == 1) {  // decode attention: one range, ranges merged by a head's block or a group's
        const int64_t n_head = 8, n_kv = 2, head_dim = n / n_head;
        const AttentionArgs args{
            n_head, n_kv, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim)), 0.0f, 0};
        KvPair kv = make_kv(*gpu_, DType::F16, 800, n_kv * head_dim);
        fill_kv(kv, 800);
        const float* q = upload(randn(static_cast<size_t>(n)));
        for (const int32_t pos : {20, 300, 700}) {
          float* att = upload(std::vector<float>(xs.size()));
          twice(
              att, [&](float* out) { gpu_->attention(q, kv.gpu, 1, &pos, args, out); },
              "attention");
        }
        gpu_->free(kv.gpu.k);
        gpu_->free(kv.gpu.v);
      }

      // Work on the buffer after the producer: the GEMV reads what the buffer holds then.
      const size_t ny = static_cast<size_t>(M * rows);
      float* y = upload(std::vector<float>(ny));
      float* y_ref = upload(std::vector<float>(ny));
      gpu_->glu(Glu::SiLU, gate, up, M, n, n, act);
      gpu_->add(act, res, M * n);
      gpu_->matmul(w, act, M, y);
      float* copy = upload(download(act, xs.size()));
      gpu_->matmul(w, copy, M, y_ref);
      const std::vector<float> got = download(y, ny), want = download(y_ref, ny);
      for (size_t i = 0; i < ny; ++i) ASSERT_EQ(got[i], want[i]) << "glu, add " << i;
      gpu_->glu(Glu::SiLU, gate, up, M, n, n, act);
      gpu_->zero(act, M * n);
      gpu_->matmul(w, act, M, y);
      for (const float v : download(y, ny)) ASSERT_EQ(v, 0.0f) << "glu, zero";
    }
    release(p);
  }
}

// The decode kernel takes one query head a block below narrow_keys keys and the heads of a kv head
// together above: every row gets the same bits either way (one range, several, and more ranges
// than the splits allow; four, two and one heads a block).
TEST_F(CudaOps, AttentionDecodeNarrowAndWideBlocksSameBits) {
  const AttnCase cases[] = {
      {8, 2, 128, 0.0f, 0, {20}},     {8, 2, 128, 0.0f, 0, {777}},  {16, 2, 96, 0.0f, 0, {333}},
      {8, 4, 256, 30.0f, 0, {400}},   {6, 2, 80, 0.0f, 64, {500}},  {4, 4, 64, 0.0f, 0, {250}},
      {8, 2, 128, 0.0f, 0, {5, 600}}, {16, 1, 576, 0.0f, 0, {700}}, {8, 2, 512, 30.0f, 0, {300}},
      {6, 2, 320, 0.0f, 0, {333}},
  };
  const int splits = 3;  // fewer than 777's ranges of 128 keys
  for (DType dt : kKvTypes)
    for (const AttnCase& c : cases) {
      if (dt == DType::Q8_0 && c.head_dim % kQK32 != 0) continue;
      const int64_t width = c.n_head_kv * c.head_dim;
      const auto M = static_cast<int64_t>(c.pos.size());
      std::vector<KvPair> kv;
      std::vector<KvView> views;
      for (const int32_t p : c.pos) {
        kv.push_back(make_kv(*gpu_, dt, p + 1, width));
        fill_kv(kv.back(), p + 1);
        views.push_back(kv.back().gpu);
      }
      auto* d_views = static_cast<KvView*>(device_bytes(sizeof(KvView) * views.size()));
      gpu_->to_device(d_views, views.data(), sizeof(KvView) * views.size());
      auto* d_pos = static_cast<int32_t*>(device_bytes(sizeof(int32_t) * c.pos.size()));
      gpu_->to_device(d_pos, c.pos.data(), sizeof(int32_t) * c.pos.size());
      const size_t n = static_cast<size_t>(M * c.n_head * c.head_dim);
      const float* q = upload(randn(n));
      const AttentionArgs args{c.n_head,   c.n_head_kv,
                               c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                               c.softcap,  c.window};
      const size_t scratch_bytes =
          cuda::attention_decode_scratch_bytes(c.n_head * M, splits, c.head_dim);
      void* scratch = device_bytes(scratch_bytes);
      ASSERT_EQ(cudaMemset(scratch, 0, scratch_bytes), cudaSuccess);
      std::vector<float> got[2];
      for (const int64_t narrow_keys : {int64_t{0}, std::numeric_limits<int64_t>::max()}) {
        float* out = upload(std::vector<float>(n));
        gpu_->synchronize();
        cuda::launch_attention_decode(q, views[0], M > 1 ? d_views : nullptr, M, d_pos, args,
                                      splits, narrow_keys, scratch, out, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        got[narrow_keys == 0 ? 0 : 1] = download(out, n);
      }
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(got[0][i], got[1][i]) << dtype_name(dt) << " head_dim " << c.head_dim << " heads "
                                        << c.n_head << "/" << c.n_head_kv << " element " << i;
      for (KvPair& p : kv) gpu_->free(p.gpu.k), gpu_->free(p.gpu.v);
    }
}

// A head size the decode kernel cannot load in runs of 8 elements is refused by name, not read
// out of line: at open (the scratch plan) and by the op itself.
TEST_F(CudaOps, AttentionRefusesHeadDimNotAMultipleOfEight) {
  ScratchPlan plan;
  plan.n_head = 4, plan.n_head_kv = 2, plan.head_dim = 12;
  EXPECT_THROW(gpu_->scratch_bytes(plan), Error);
  const int64_t head_dim = 12, width = 2 * head_dim;
  KvPair kv = make_kv(*gpu_, DType::F16, 8, width);
  const AttentionArgs args{4, 2, head_dim, 0.25f, 0.0f, 0};
  float* q = upload(randn(static_cast<size_t>(4 * head_dim)));
  float* out = upload(std::vector<float>(static_cast<size_t>(4 * head_dim)));
  const int32_t pos = 3;
  try {
    gpu_->attention(q, kv.gpu, 1, &pos, args, out);
    ADD_FAILURE() << "head_dim 12 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 12 is not a multiple of 8"), std::string::npos)
        << e.what();
  }
  gpu_->free(kv.gpu.k);
  gpu_->free(kv.gpu.v);
}

// A decode step of three sequences, each over a cache of its own length: kv_store_each and
// attention_each give the cache bytes and the bits of kv_store and attention a row at a time.
TEST_F(CudaOps, DecodeStepOpsBitIdenticalToOneRowAtATime) {
  const int64_t n_head = 8, n_head_kv = 2, head_dim = 128, width = n_head_kv * head_dim;
  const int64_t row = n_head * head_dim;
  const AttentionArgs args{n_head, n_head_kv, head_dim, 1.0f / std::sqrt(128.0f), 0.0f, 0};
  const std::vector<int32_t> pos = {5, 300, 41};
  const std::vector<int64_t> capacity = {16, 400, 64};
  const auto M = static_cast<int64_t>(pos.size());
  const auto bytes_of = [&](const void* p, size_t n) {
    std::vector<uint8_t> v(n);
    gpu_->to_host(v.data(), p, n);
    return v;
  };
  for (DType dt : kKvTypes) {
    // The same history in two copies of each cache.
    std::vector<KvPair> together, alone;
    std::vector<KvView> views;
    for (size_t s = 0; s < pos.size(); ++s) {
      together.push_back(make_kv(*gpu_, dt, capacity[s], width));
      fill_kv(together.back(), pos[s]);
      alone.push_back(make_kv(*gpu_, dt, capacity[s], width));
      const size_t n = together[s].cpu_k.size();
      gpu_->to_device(alone[s].gpu.k, bytes_of(together[s].gpu.k, n).data(), n);
      gpu_->to_device(alone[s].gpu.v, bytes_of(together[s].gpu.v, n).data(), n);
      views.push_back(together[s].gpu);
    }
    const std::vector<float> k = randn(static_cast<size_t>(M * width)),
                             v = randn(static_cast<size_t>(M * width)),
                             q = randn(static_cast<size_t>(M * row));
    const float *dk = upload(k), *dv = upload(v), *dq = upload(q);
    float* out_together = upload(std::vector<float>(q.size()));
    float* out_alone = upload(std::vector<float>(q.size()));
    gpu_->kv_store_each(views.data(), dk, dv, M, pos.data());
    gpu_->attention_each(dq, views.data(), M, pos.data(), args, out_together);
    for (int64_t m = 0; m < M; ++m) {
      const auto s = static_cast<size_t>(m);
      gpu_->kv_store(alone[s].gpu, dk + m * width, dv + m * width, 1, &pos[s]);
      gpu_->attention(dq + m * row, alone[s].gpu, 1, &pos[s], args, out_alone + m * row);
    }
    for (size_t s = 0; s < pos.size(); ++s) {
      const size_t n = together[s].cpu_k.size();
      EXPECT_EQ(bytes_of(together[s].gpu.k, n), bytes_of(alone[s].gpu.k, n)) << dtype_name(dt);
      EXPECT_EQ(bytes_of(together[s].gpu.v, n), bytes_of(alone[s].gpu.v, n)) << dtype_name(dt);
    }
    const std::vector<float> a = download(out_together, q.size()),
                             b = download(out_alone, q.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << dtype_name(dt);
    // A position past its own cache (the third holds 64 rows) is refused.
    const std::vector<int32_t> past = {5, 300, 64};
    EXPECT_THROW(gpu_->kv_store_each(views.data(), dk, dv, M, past.data()), Error);
    EXPECT_THROW(gpu_->attention_each(dq, views.data(), M, past.data(), args, out_together), Error);
    for (std::vector<KvPair>* caches : {&together, &alone})
      for (KvPair& c : *caches) {
        gpu_->free(c.gpu.k);
        gpu_->free(c.gpu.v);
      }
  }
}

struct PrefillCase {
  int64_t n_head, n_head_kv, head_dim;
  float softcap;
  int64_t window;
  int64_t n_past, M;  // query rows at positions n_past .. n_past + M - 1
  int64_t image = 0;  // rows M / 4 .. M / 4 + image - 1 see each other (key_end)
};

float cache_value(DType dt, const uint8_t* row, int64_t i) {
  uint16_t h;
  std::memcpy(&h, row + 2 * i, 2);
  return dt == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// The tensor-core prefill kernel (f16 / bf16 caches, head_dim 64, 128, 256) against the CPU
// backend's f32 attention. The kernel rounds Q to the cache type by design; the reference gets
// the same rounded Q (both round to nearest even), so Q's rounding adds no difference and what is
// left is bounded per (row, head) as follows, with u_p the unit roundoff of the cache type
// (2^-11 for f16, 2^-8 for bf16), n the keys of the row and vmax = max |v| over the kv head:
//  * scores: both sides sum exact products of the same 16-bit Q and K in f32, in different
//    orders (the tensor cores possibly truncating), so they differ by at most
//    E = scale * 2 * D * 2^-23 * |q| * max_j |k_j| (Cauchy-Schwarz bounds sum |q_d k_d|); the
//    softcap's tanh is 1-Lipschitz. Each softmax weight then moves by a factor within
//    exp(+-2E), and the output by at most expm1(2E) * vmax;
//  * P rounded to the cache type before P V, the denominator summed from the unrounded f32
//    weights: relative error u_p per weight, so at most u_p * vmax; f16 holds weights below
//    2^-14 as subnormals, off by up to 2^-25 each against a denominator of at least 1, so at
//    most n * 2^-25 * vmax more;
//  * the f32 sums of P V on both sides (weights summing to at most the denominator):
//    2 * n * 2^-23 * vmax;
//  * exp / tanh implementations and the softmax's summation order: 2e-5, as for the f32 kernel.
TEST_F(CudaOps, AttentionPrefillTensorCores) {
  const PrefillCase cases[] = {
      {8, 2, 128, 0.0f, 0, 0, 600},        // long prefill from empty, GQA 4, last tile partial
      {8, 2, 128, 0.0f, 0, 300, 77},       // chunked prefill after 300 cached positions
      {4, 1, 64, 30.0f, 0, 0, 2},          // two rows, softcap, all heads of one kv head
      {12, 2, 64, 0.0f, 16, 50, 100},      // group 6 (rows per block not a multiple), window 16
      {8, 1, 64, 20.0f, 7, 0, 65},         // window 7 and softcap from position 0
      {32, 1, 64, 0.0f, 0, 10, 45},        // group 32: two blocks of 16 heads per kv head
      {4, 4, 256, 50.0f, 0, 100, 33},      // head_dim 256, softcap, no GQA
      {2, 1, 256, 0.0f, 40, 0, 130},       // head_dim 256, window
      {8, 8, 128, 0.0f, 0, 5, 1},          // one row (the decode kernel)
      {8, 2, 128, 0.0f, 0, 300, 77, 20},   // an image of 20 rows
      {4, 4, 256, 50.0f, 0, 100, 33, 16},  // head_dim 256, softcap, an image
      {12, 2, 64, 0.0f, 16, 50, 100, 40},  // window shorter than the image
  };
  for (DType dt : {DType::F16, DType::BF16}) {
    const double u_p = dt == DType::F16 ? 0x1p-11 : 0x1p-8;
    const double subnormal = dt == DType::F16 ? 0x1p-25 : 0.0;
    for (const PrefillCase& c : cases) {
      const int64_t D = c.head_dim, width = c.n_head_kv * D, fill = c.n_past + c.M;
      const std::string what = std::string("attention ") + dtype_name(dt) +
                               " hd=" + std::to_string(D) + " M=" + std::to_string(c.M) +
                               " past=" + std::to_string(c.n_past) +
                               " image=" + std::to_string(c.image);
      KvPair kv = make_kv(*gpu_, dt, fill + 3, width);
      fill_kv(kv, fill);
      std::vector<int32_t> pos(static_cast<size_t>(c.M)), key_end(pos.size(), 0);
      std::iota(pos.begin(), pos.end(), static_cast<int32_t>(c.n_past));
      for (int64_t m = c.M / 4; m < c.M / 4 + c.image; ++m)
        key_end[static_cast<size_t>(m)] = static_cast<int32_t>(c.n_past + c.M / 4 + c.image);

      std::vector<float> q = randn(static_cast<size_t>(c.M * c.n_head * D));
      for (float& x : q)
        x = dt == DType::F16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(f32_to_bf16(x));
      const float scale = 1.0f / std::sqrt(static_cast<float>(D));
      // Sinks on every other case: they only add to each row's denominator, so the bound below
      // (relative to the softmax weights) holds with them.
      const std::vector<float> sinks = randn(static_cast<size_t>(c.n_head), 2.0f);
      const bool sink = (&c - cases) % 2 == 1;
      AttentionArgs args{c.n_head, c.n_head_kv, D, scale, c.softcap, c.window};
      args.key_end = c.image > 0 ? key_end.data() : nullptr;
      std::vector<float> want(q.size());
      args.sinks = sink ? sinks.data() : nullptr;
      cpu_->attention(q.data(), kv.cpu, c.M, pos.data(), args, want.data());
      float* out = upload(std::vector<float>(q.size()));
      args.sinks = sink ? upload(sinks) : nullptr;
      gpu_->attention(upload(q), kv.gpu, c.M, pos.data(), args, out);
      const std::vector<float> got = download(out, q.size());

      // max_j |k_j| and max |v| per kv head, from the cache's own values.
      std::vector<double> k_norm(static_cast<size_t>(c.n_head_kv), 0.0),
          v_max(static_cast<size_t>(c.n_head_kv), 0.0);
      for (int64_t j = 0; j < fill; ++j)
        for (int64_t hk = 0; hk < c.n_head_kv; ++hk) {
          double kk = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            const int64_t i = hk * D + d;
            const double kv_k = cache_value(dt, kv.cpu_k.data() + j * kv.cpu.row_bytes, i);
            const double kv_v = cache_value(dt, kv.cpu_v.data() + j * kv.cpu.row_bytes, i);
            kk += kv_k * kv_k;
            v_max[static_cast<size_t>(hk)] =
                std::max(v_max[static_cast<size_t>(hk)], std::fabs(kv_v));
          }
          k_norm[static_cast<size_t>(hk)] =
              std::max(k_norm[static_cast<size_t>(hk)], std::sqrt(kk));
        }
      int reported = 0;
      for (int64_t m = 0; m < c.M; ++m) {
        const int64_t p = pos[static_cast<size_t>(m)];
        const int64_t hi = std::max<int64_t>(p + 1, key_end[static_cast<size_t>(m)]);
        const int64_t n = hi - (c.window > 0 ? std::max<int64_t>(0, p + 1 - c.window) : 0);
        for (int64_t h = 0; h < c.n_head; ++h) {
          const size_t hk = static_cast<size_t>(h / (c.n_head / c.n_head_kv));
          const float* qr = q.data() + (m * c.n_head + h) * D;
          double qq = 0.0;
          for (int64_t d = 0; d < D; ++d) qq += static_cast<double>(qr[d]) * qr[d];
          const double E =
              scale * 2.0 * static_cast<double>(D) * 0x1p-23 * std::sqrt(qq) * k_norm[hk];
          const double tol = v_max[hk] * (std::expm1(2.0 * E) + u_p +
                                          static_cast<double>(n) * (subnormal + 2.0 * 0x1p-23)) +
                             2e-5;
          for (int64_t d = 0; d < D; ++d) {
            const size_t i = static_cast<size_t>((m * c.n_head + h) * D + d);
            if (!(std::fabs(got[i] - want[i]) <= tol) && reported++ < 5)
              ADD_FAILURE() << what << " row " << m << " head " << h << " dim " << d << ": cuda "
                            << got[i] << " cpu " << want[i] << " tol " << tol;
          }
        }
      }
      gpu_->free(kv.gpu.k);
      gpu_->free(kv.gpu.v);
    }
  }
}

}  // namespace
}  // namespace ts

#else

TEST(CudaOps, SkippedWithoutCudaBuild) {
  GTEST_SKIP() << "built without CUDA";
}

#endif
