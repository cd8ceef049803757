// CPU matmul kernels, every weight type on every instruction set this CPU has, against
// dequantise-then-dot in double, and every SIMD path against the scalar one.
//
// Tolerances (per output, from the inputs, never a fixed fudge):
// * Quantised weights: the kernels quantise each activation block symmetrically to int8 with
//   d = max|x| / 127, so |x_k - d q_k| <= d / 2 (plus a few ulp from the f32 reciprocal). The
//   weights are used exactly (integer codes and scales), so |y - y_ref| <= sum_k |w_k| d_k / 2,
//   plus f32 rounding of the per-block float terms (bounded as below). MXFP4's activations are
//   packed in two planes, the second rounding the first one's error: the bound shrinks by 127.
// * f32 / f16 / bf16 weights: only f32 rounding. A chain of n FMAs accumulating terms t_i errs
//   by at most n * eps * sum |t_i|; the longest chain is K / 4 (the scalar path's four
//   accumulators), plus a few for the final reduction.
// * SIMD vs scalar: both round; the bound above, twice.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/matmul_lowbit.h"
#include "backend/cpu/panel_layout.h"
#include "core/error.h"
#include "quant/dequant.h"
#include "quant/dtype.h"

namespace ts::cpu {
namespace {

const std::vector<DType> kTypes = {
    DType::F32,   DType::F16,     DType::BF16,   DType::Q4_0,   DType::Q4_1,
    DType::Q5_0,  DType::Q5_1,    DType::Q8_0,   DType::Q2_K,   DType::Q3_K,
    DType::Q4_K,  DType::Q5_K,    DType::Q6_K,   DType::IQ4_NL, DType::IQ4_XS,
    DType::MXFP4, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,  DType::IQ3_XXS,
    DType::IQ3_S, DType::IQ1_S,   DType::IQ1_M,  DType::TQ1_0,  DType::TQ2_0};

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

bool is_lowbit(DType t) {
  return t == DType::IQ2_XXS || t == DType::IQ2_XS || t == DType::IQ2_S || t == DType::IQ3_XXS ||
         t == DType::IQ3_S || t == DType::IQ1_S || t == DType::IQ1_M || t == DType::TQ1_0 ||
         t == DType::TQ2_0;
}

// Byte offsets of the f16 scale fields (d, and dmin / m) in each block, as in blocks.h.
std::vector<int> scale_offsets(DType t) {
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
      return {};  // its f16 scale is the top nibbles of the u16 at 48..55 (random_weights)
    default:
      return {0};
  }
}

struct Matrix {
  DType dtype;
  int64_t rows, cols;
  size_t stride;
  std::vector<uint8_t> bytes;
  std::vector<float> dequant;    // rows x cols, what the weight means
  std::vector<float> magnitude;  // |d q part| + |min part|: what the kernel's float terms carry

  WeightView view() const { return {dtype, bytes.data(), rows, cols, stride}; }
};

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& bytes, int64_t rows,
                              int64_t cols, size_t stride) {
  std::vector<float> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row(t, bytes.data() + r * stride, out.data() + r * cols, cols);
  return out;
}

// The types with a min (q4_1, q5_1, q2_k, q4_k, q5_k) add two float terms per block that may
// cancel; their magnitudes come from dequantising with the min field, then the d field, zeroed.
std::vector<float> part_magnitudes(const Matrix& m) {
  const std::vector<int> fields = scale_offsets(m.dtype);
  std::vector<float> out(m.dequant.size());
  if (is_float(m.dtype) || fields.size() <= 1) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::fabs(m.dequant[i]);
    return out;
  }
  std::vector<std::vector<float>> parts;
  for (int zeroed : fields) {
    std::vector<uint8_t> bytes = m.bytes;
    const uint32_t block_bytes = dtype_info(m.dtype).block_bytes;
    for (size_t b = 0; b < bytes.size() / block_bytes; ++b)
      std::memset(bytes.data() + b * block_bytes + zeroed, 0, 2);
    parts.push_back(dequantize(m.dtype, bytes, m.rows, m.cols, m.stride));
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::fabs(parts[0][i]) + std::fabs(parts[1][i]);
  return out;
}

// Random weights: random quant bytes with moderate f16 scales, or random floats.
Matrix random_weights(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m{t, rows, cols, row_bytes(t, cols, "test weight"), {}, {}, {}};
  m.bytes.resize(m.stride * rows);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (int64_t i = 0; i < rows * cols && is_float(t); ++i) {
    const float v = normal(rng);
    if (t == DType::F32) std::memcpy(m.bytes.data() + 4 * i, &v, 4);
    const uint16_t h = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
    if (t != DType::F32) std::memcpy(m.bytes.data() + 2 * i, &h, 2);
  }
  if (!is_float(t)) {
    for (auto& b : m.bytes) b = static_cast<uint8_t>(byte(rng));
    const DTypeInfo& info = dtype_info(t);
    // MXFP4's one scale byte is an e8m0 exponent: 2^-7 .. 2^0.
    std::uniform_int_distribution<int> e8m0(120, 127);
    for (size_t blk = 0; blk < m.bytes.size() / info.block_bytes && t == DType::MXFP4; ++blk)
      m.bytes[blk * info.block_bytes] = static_cast<uint8_t>(e8m0(rng));
    for (size_t blk = 0; blk < m.bytes.size() / info.block_bytes && t != DType::MXFP4; ++blk)
      for (int off : scale_offsets(t)) {
        const uint16_t h = f32_to_f16(scale(rng));
        std::memcpy(m.bytes.data() + blk * info.block_bytes + off, &h, 2);
      }
    for (size_t blk = 0; blk < m.bytes.size() / info.block_bytes && t == DType::IQ1_M; ++blk) {
      const uint16_t h = f32_to_f16(scale(rng));
      uint8_t* sc = m.bytes.data() + blk * info.block_bytes + 48;
      for (int i = 0; i < 4; ++i)
        sc[2 * i + 1] =
            static_cast<uint8_t>((sc[2 * i + 1] & 0x0F) | (((h >> (4 * i)) & 0xF) << 4));
    }
  }
  m.dequant = dequantize(t, m.bytes, rows, cols, m.stride);
  m.magnitude = part_magnitudes(m);
  return m;
}

// Activations with occasional outliers, so that block scales vary a lot.
std::vector<float> random_acts(int64_t M, int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 63);
  std::vector<float> x(M * K);
  for (auto& v : x) v = normal(rng) * (pick(rng) == 0 ? 25.0f : 1.0f);
  return x;
}

// Activation quantisation step of the block holding element k.
float act_step(DType t, const float* x, int64_t k) {
  const int64_t block = dtype_info(t).block_elems == 256 ? 256 : 32;
  const int64_t b0 = k / block * block;
  float amax = 0;
  for (int64_t i = b0; i < b0 + block; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax / 127.0f;
}

// The activation rounding error per step: half a step (and a few ulp from the f32 reciprocal).
// MXFP4's second plane rounds the first one's error with a step of its own, at most 1 / 127 of
// that half step.
double error_per_step(DType t) {
  const double half = 0.5 + 1e-4;
  return t == DType::MXFP4 ? half * half / 127 : half;
}

struct Reference {
  std::vector<double> y;      // M x rows, exact-ish dot of the dequantised weight
  std::vector<double> quant;  // M x rows, bound on the activation-quantisation error
  std::vector<double> round;  // M x rows, bound on one kernel's f32 rounding
};

Reference reference(const Matrix& w, const std::vector<float>& x, int64_t M) {
  const int64_t K = w.cols;
  Reference ref{std::vector<double>(M * w.rows), std::vector<double>(M * w.rows),
                std::vector<double>(M * w.rows)};
  const bool quant = !takes_f32_activations(w.dtype);
  const int64_t chain = quant ? K / dtype_info(w.dtype).block_elems : K / 4;
  for (int64_t m = 0; m < M; ++m) {
    std::vector<double> step(K, 0.0);
    if (quant)
      for (int64_t k = 0; k < K; ++k) step[k] = act_step(w.dtype, &x[m * K], k);
    for (int64_t r = 0; r < w.rows; ++r) {
      double dot = 0, qerr = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double wk = w.dequant[r * K + k], xk = x[m * K + k];
        dot += wk * xk;
        qerr += std::fabs(wk) * step[k] * error_per_step(w.dtype);
        mag += w.magnitude[r * K + k] * (std::fabs(xk) + step[k]);
      }
      ref.y[m * w.rows + r] = dot;
      ref.quant[m * w.rows + r] = qerr;
      ref.round[m * w.rows + r] = (chain + 16) * static_cast<double>(FLT_EPSILON) * mag;
    }
  }
  return ref;
}

// The fill of a wider output than the rows computed: kernels must leave it outside their range.
constexpr float kUntouched = -12345.0f;

// Rows [r0, r1) of the M x ldy output y (of a weight of `rows` rows) within the reference's bound
// of the dequantised dot, and every other entry left at kUntouched.
void expect_rows_within_bound(const std::vector<float>& y, int64_t M, int64_t rows, int64_t ldy,
                              int64_t r0, int64_t r1, const Reference& ref) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = 0; r < ldy; ++r) {
      const float got = y[m * ldy + r];
      if (r < r0 || r >= r1) {
        ASSERT_EQ(got, kUntouched) << "wrote outside the row range at m " << m << " r " << r;
        continue;
      }
      const size_t i = m * rows + r;
      ASSERT_LE(std::fabs(got - ref.y[i]), ref.quant[i] + ref.round[i])
          << "m " << m << " r " << r << " got " << got << " ref " << ref.y[i];
    }
}

struct Shape {
  int64_t rows, cols, M;
};

std::vector<Shape> shapes_for(DType t) {
  if (is_float(t)) return {{37, 37, 1}, {37, 781, 3}, {21, 256, 64}, {19, 4096, 5}};
  if (dtype_info(t).block_elems == 32)
    // The last: the AVX512-VNNI GEMM over three chunks of blocks (16, 16 and 1), a full and a
    // partial 32-row panel, and activation tiles of 6, 6 and 4 rows.
    return {{37, 96, 1}, {37, 544, 3}, {16, 160, 5}, {21, 288, 64}, {45, 1056, 16}};
  // k-quants: prompts of 5 to 7 rows meet each decoded super-block at once, with a last weight row
  // without a partner; from 8 rows on AVX512-VNNI the k-quant GEMM: chunks of 2, 2 and 1
  // super-blocks, a full and a partial 32-row panel, activation tiles of 6, 6 and 4 rows (and of
  // 6 and 2); elsewhere 32 rows at a time (a partial last chunk of 5 at M 37).
  return {{37, 256, 1},  {37, 768, 3},   {16, 256, 5}, {21, 512, 64},
          {24, 512, 37}, {45, 1280, 16}, {40, 512, 8}};
}

std::vector<Isa> available_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa_available(isa)) out.push_back(isa);
  return out;
}

class MatmulKernels : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulKernels, MatchDequantisedDotWithinQuantisationBound) {
  const DType t = GetParam();
  std::mt19937 rng(1234 + static_cast<int>(t));
  for (const Shape& s : shapes_for(t)) {
    const Matrix w = random_weights(t, s.rows, s.cols, rng);
    const std::vector<float> x = random_acts(s.M, s.cols, rng);
    const Reference ref = reference(w, x, s.M);
    PackedActs packed;
    pack_activations(t, x.data(), s.M, s.cols, packed);
    // Rows [r0, r1) only, into a wider output: nothing outside may be touched.
    const int64_t r0 = 5, r1 = s.rows - 3, ldy = s.rows + 3;
    std::vector<std::vector<float>> outs;
    for (Isa isa : available_isas()) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + isa_name(isa) + " rows " +
                   std::to_string(s.rows) + " K " + std::to_string(s.cols) + " M " +
                   std::to_string(s.M));
      std::vector<float> y(s.M * ldy, kUntouched);
      matmul_rows_isa(isa, w.view(), packed, r0, r1, y.data(), ldy);
      ASSERT_NO_FATAL_FAILURE(expect_rows_within_bound(y, s.M, s.rows, ldy, r0, r1, ref));
      outs.push_back(std::move(y));
    }
    for (size_t p = 1; p < outs.size(); ++p)
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t r = r0; r < r1; ++r) {
          const double bound = 2 * ref.round[m * s.rows + r];
          ASSERT_LE(std::fabs(outs[p][m * ldy + r] - outs[0][m * ldy + r]), bound)
              << dtype_name(t) << " " << isa_name(available_isas()[p]) << " vs scalar, m " << m
              << " r " << r;
        }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, MatmulKernels, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The low-bit types' AVX2 row decoders give the reference dequantisation bit for bit (NaN for
// NaN) on random blocks, whatever their scale bits (infinities, NaNs, subnormals included).
TEST(LowbitDecoders, Avx2IsTheReferenceBitForBit) {
  if (!isa_available(Isa::Avx2)) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> byte(0, 255);
  for (DType t : kTypes) {
    if (!is_lowbit(t)) continue;
    const int64_t cols = 256 * 64;
    std::vector<uint8_t> bytes(row_bytes(t, cols, "test"));
    for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
    std::vector<float> want(cols), got(cols);
    dequantize_row(t, bytes.data(), want.data(), cols);
    lowbit_decoder_avx2()(t, bytes.data(), got.data(), cols);
    for (int64_t i = 0; i < cols; ++i) {
      if (std::isnan(want[i]) && std::isnan(got[i])) continue;
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << dtype_name(t) << " element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

// `x`'s M activation rows through the matmul together (a prompt) and each alone (decode), both as
// M x w.rows outputs.
struct PromptAndAlone {
  std::vector<float> prompt, alone;
};
PromptAndAlone prompt_and_alone(Isa isa, const Matrix& w, const std::vector<float>& x, int64_t M) {
  PromptAndAlone out{std::vector<float>(M * w.rows), std::vector<float>(M * w.rows)};
  PackedActs all;
  pack_activations(w.dtype, x.data(), M, w.cols, all);
  matmul_rows_isa(isa, w.view(), all, 0, w.rows, out.prompt.data(), w.rows);
  for (int64_t m = 0; m < M; ++m) {
    PackedActs one;
    pack_activations(w.dtype, x.data() + m * w.cols, 1, w.cols, one);
    matmul_rows_isa(isa, w.view(), one, 0, w.rows, out.alone.data() + m * w.rows, w.rows);
  }
  return out;
}

// A prompt's rows of a k-quant matmul against the same rows one at a time (decode). Below the
// GEMM's kGemmMinRows (8) the prompt path decodes a super-block once for all rows but sums in
// decode's order: the same bits (on AVX512-VNNI the low-bit grid types' decode dots each chunk
// pair as it decodes it, the prompt keeps the pairs: the same integer sums). From 8 rows on
// AVX512-VNNI the GEMM has the same integer sums but rescales them in another order: within twice
// one kernel's rounding bound.
TEST(MatmulKernels, KQuantPromptRowsAgreeWithOneRowAtATime) {
  std::mt19937 rng(77);
  const int64_t rows = 45, cols = 512;
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS,
                  DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,
                  DType::IQ1_S, DType::IQ1_M, DType::TQ1_0, DType::TQ2_0}) {
    const Matrix w = random_weights(t, rows, cols, rng);
    for (const int64_t M : {7, 37}) {
      const std::vector<float> x = random_acts(M, cols, rng);
      const Reference ref = reference(w, x, M);
      for (Isa isa : available_isas()) {
        const PromptAndAlone y = prompt_and_alone(isa, w, x, M);
        for (int64_t i = 0; i < M * rows; ++i) {
          if (M < 8)
            ASSERT_EQ(y.prompt[i], y.alone[i])
                << dtype_name(t) << " " << isa_name(isa) << " m " << i / rows << " r " << i % rows;
          else
            ASSERT_LE(std::fabs(y.prompt[i] - y.alone[i]), 2 * ref.round[i])
                << dtype_name(t) << " " << isa_name(isa) << " M " << M << " m " << i / rows << " r "
                << i % rows;
        }
      }
    }
  }
}

// iq3_xxs's VBMI decoder (its grid as codes in registers) gives the AVX512-VNNI decoder's bits, in
// decode (one row) and in a prompt's chunk pairs; only one of them runs where VBMI is present.
TEST(MatmulKernels, Iq3xxsVbmiIsTheVnniKernelBitForBit) {
  if (!isa_available(Isa::Avx512) || !__builtin_cpu_supports("avx512vnni") ||
      !__builtin_cpu_supports("avx512vbmi"))
    GTEST_SKIP() << "no AVX512-VBMI";
  std::mt19937 rng(91);
  const int64_t rows = 13, cols = 1024;
  const Matrix w = random_weights(DType::IQ3_XXS, rows, cols, rng);
  for (const int64_t M : {1, 5}) {
    const std::vector<float> x = random_acts(M, cols, rng);
    PackedActs packed;
    pack_activations(DType::IQ3_XXS, x.data(), M, cols, packed);
    std::vector<float> vbmi(M * rows), vnni(M * rows);
    avx512vbmi_lowbit_kernel(DType::IQ3_XXS)(w.view(), packed, 0, rows, vbmi.data(), rows);
    avx512vnni_int_kernel(DType::IQ3_XXS)(w.view(), packed, 0, rows, vnni.data(), rows);
    for (int64_t i = 0; i < M * rows; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(vbmi[i]), std::bit_cast<uint32_t>(vnni[i]))
          << "M " << M << " i " << i;
  }
}

// Float weights: a prompt's rows (tiles of several weight and activation rows) give each row's
// bits alone (decode's tile), whatever the tile an output falls in; K with a tail past the
// vectors too.
TEST(MatmulKernels, FloatPromptRowsAreOneRowAtATimeBitForBit) {
  std::mt19937 rng(78);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (const int64_t cols : {512, 515}) {
      const int64_t rows = 47;
      const Matrix w = random_weights(t, rows, cols, rng);
      for (const int64_t M : {2, 3, 5, 13}) {
        const std::vector<float> x = random_acts(M, cols, rng);
        for (Isa isa : available_isas()) {
          const PromptAndAlone y = prompt_and_alone(isa, w, x, M);
          for (int64_t i = 0; i < M * rows; ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(y.prompt[i]), std::bit_cast<uint32_t>(y.alone[i]))
                << dtype_name(t) << " " << isa_name(isa) << " K " << cols << " M " << M << " m "
                << i / rows << " r " << i % rows;
        }
      }
    }
  }
}

// q8_0, the 32-element 4- and 5-bit types (mxfp4 too), q4_k to q6_k and iq4_xs weights packed into
// the panel layout (panel_layout.h), read by the AVX512-VNNI panel kernels: within the same bounds
// as above of the dequantised dot and of the scalar kernel on the unpacked weight, for whole-panel
// row ranges; the one-row GEMV gives the GEMM's bits.
TEST(PanelKernels, MatchScalarOnTheRowLayout) {
  if (!panel_kernels_active()) GTEST_SKIP() << "no AVX512-VNNI on the active path: no panels";
  std::mt19937 rng(99);
  // Chunks of 16, 16 and 1 blocks (q8_0, 1056 columns) or 2, 2 and 1 super-blocks (k-quants, 1280);
  // activation tiles of 6 and fewer rows; row ranges (all panels but the first and the last) of
  // one to three panels.
  const std::vector<Shape> block32_shapes = {
      {96, 96, 1}, {160, 1056, 1}, {160, 96, 2}, {128, 1056, 6}, {128, 288, 64}};
  const std::vector<Shape> k_quant_shapes = {
      {96, 256, 1}, {160, 1280, 1}, {160, 256, 2}, {128, 1280, 6}, {160, 1280, 16}};
  const std::vector<std::pair<DType, std::vector<Shape>>> cases = {{DType::Q8_0,
                                                                    {{96, 96, 1},
                                                                     {128, 544, 1},
                                                                     {160, 1056, 1},
                                                                     {160, 96, 2},
                                                                     {96, 544, 5},
                                                                     {128, 1056, 6},
                                                                     {160, 1056, 16},
                                                                     {128, 288, 64}}},
                                                                   {DType::Q4_K,
                                                                    {{96, 256, 1},
                                                                     {128, 512, 1},
                                                                     {160, 1280, 1},
                                                                     {160, 256, 2},
                                                                     {96, 512, 5},
                                                                     {128, 1280, 6},
                                                                     {160, 1280, 16},
                                                                     {128, 768, 64}}},
                                                                   {DType::Q5_K, k_quant_shapes},
                                                                   {DType::Q4_0, block32_shapes},
                                                                   {DType::IQ4_NL, block32_shapes},
                                                                   {DType::MXFP4, block32_shapes},
                                                                   {DType::Q5_0, block32_shapes},
                                                                   {DType::Q4_1, block32_shapes},
                                                                   {DType::Q5_1, block32_shapes},
                                                                   {DType::Q6_K, k_quant_shapes},
                                                                   {DType::IQ4_XS, k_quant_shapes}};
  for (const auto& [t, shapes] : cases)
    for (const Shape& s : shapes) {
      if (!panel_layout_fits(t, kPanelRows)) continue;  // mxfp4 under TURBOSPARK_ACTS=f32
      SCOPED_TRACE(std::string(dtype_name(t)) + " rows " + std::to_string(s.rows) + " K " +
                   std::to_string(s.cols) + " M " + std::to_string(s.M));
      const Matrix w = random_weights(t, s.rows, s.cols, rng);
      const std::vector<float> x = random_acts(s.M, s.cols, rng);
      const Reference ref = reference(w, x, s.M);
      PackedActs packed;
      pack_activations(t, x.data(), s.M, s.cols, packed);
      std::vector<uint8_t> panels = w.bytes;
      pack_panels(t, panels.data(), s.rows, s.cols, w.stride, 0, s.rows / kPanelRows);
      ASSERT_NE(panels, w.bytes);
      WeightView pw = w.view();
      pw.data = panels.data();
      pw.layout = WeightLayout::Panels;
      // Panels [1, last) only, into a wider output: nothing outside may be touched.
      const int64_t r0 = kPanelRows, r1 = s.rows - kPanelRows, ldy = s.rows + 3;
      std::vector<float> y(s.M * ldy, kUntouched), scalar(s.M * ldy);
      matmul_rows_isa(Isa::Avx512, pw, packed, r0, r1, y.data(), ldy);
      matmul_rows_isa(Isa::Scalar, w.view(), packed, r0, r1, scalar.data(), ldy);
      ASSERT_NO_FATAL_FAILURE(expect_rows_within_bound(y, s.M, s.rows, ldy, r0, r1, ref));
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t r = r0; r < r1; ++r)
          ASSERT_LE(std::fabs(y[m * ldy + r] - scalar[m * ldy + r]), 2 * ref.round[m * s.rows + r])
              << "vs scalar, m " << m << " r " << r;
      // Each activation row alone through the GEMV: the GEMM's bits.
      for (int64_t m = 0; m < s.M && s.M > 1; ++m) {
        PackedActs one;
        pack_activations(t, x.data() + m * s.cols, 1, s.cols, one);
        std::vector<float> y1(s.rows, 0.0f);
        matmul_rows_isa(Isa::Avx512, pw, one, r0, r1, y1.data(), s.rows);
        for (int64_t r = r0; r < r1; ++r)
          ASSERT_EQ(y1[r], y[m * ldy + r]) << "GEMV vs GEMM, m " << m << " r " << r;
      }
    }
}

TEST(PanelKernels, RefusePartialPanelsAndOtherPaths) {
  if (!panel_kernels_active()) GTEST_SKIP() << "no AVX512-VNNI on the active path: no panels";
  std::mt19937 rng(5);
  const Matrix w = random_weights(DType::Q8_0, 64, 64, rng);
  std::vector<uint8_t> panels = w.bytes;
  pack_panels(DType::Q8_0, panels.data(), 64, 64, w.stride, 0, 2);
  WeightView pw = w.view();
  pw.data = panels.data();
  pw.layout = WeightLayout::Panels;
  const std::vector<float> x(64, 1.0f);
  PackedActs packed;
  pack_activations(DType::Q8_0, x.data(), 1, 64, packed);
  std::vector<float> y(64);
  EXPECT_THROW(matmul_rows_isa(Isa::Avx512, pw, packed, 16, 64, y.data(), 64), Error);
  EXPECT_THROW(matmul_rows_isa(Isa::Avx512, pw, packed, 0, 48, y.data(), 64), Error);
  EXPECT_THROW(matmul_rows_isa(Isa::Scalar, pw, packed, 0, 64, y.data(), 64), Error);
  // Whole panels of a weight whose rows do not fill them, and other types, are never packed.
  EXPECT_THROW(pack_panels(DType::Q8_0, panels.data(), 48, 64, w.stride, 0, 1), Error);
  EXPECT_THROW(pack_panels(DType::Q3_K, panels.data(), 64, 256, w.stride, 0, 1), Error);
  EXPECT_THROW(pack_panels(DType::Q8_0, panels.data(), 64, 64, w.stride, 1, 3), Error);
}

TEST(MatmulKernelsArgs, RefuseMismatchedPackingAndPartialBlocks) {
  std::vector<float> x(64, 1.0f);
  PackedActs packed;
  EXPECT_THROW(pack_activations(DType::Q4_K, x.data(), 1, 64, packed), Error);
  EXPECT_THROW(pack_activations(DType::Q8_0, x.data(), 1, 48, packed), Error);
  pack_activations(DType::Q8_0, x.data(), 1, 64, packed);
  std::vector<uint8_t> wbytes(2 * 18);
  WeightView w{DType::Q4_0, wbytes.data(), 1, 64, 36};
  float y[1];
  EXPECT_THROW(matmul_rows(w, packed, 0, 1, y, 1), Error);  // packed for q8_0, weight q4_0
  w.dtype = DType::Q8_0;
  EXPECT_THROW(matmul_rows(w, packed, 0, 2, y, 1), Error);  // row range past the weight
}

TEST(MatmulKernelsIsa, ActiveIsaIsAvailable) {
  EXPECT_TRUE(isa_available(active_isa()));
  EXPECT_STREQ(matmul_isa(), isa_name(active_isa()));
}

TEST(MatmulKernelsIsa, EnvironmentNamesALowerPath) {
  Isa best = Isa::Scalar;
  for (Isa isa : available_isas()) best = isa;
  EXPECT_EQ(resolve_isa(nullptr), best);
  EXPECT_EQ(resolve_isa(""), best);
  for (Isa isa : available_isas()) EXPECT_EQ(resolve_isa(isa_name(isa)), isa);
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!isa_available(isa)) {
      EXPECT_THROW(resolve_isa(isa_name(isa)), Error);
    }
  }
  EXPECT_THROW(resolve_isa("sse9"), Error);
}

}  // namespace
}  // namespace ts::cpu
