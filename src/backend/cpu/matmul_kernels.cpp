// Dispatch of the CPU matmul kernels: activation packing, argument checks, and the choice of
// instruction set (once, from cpuid and TURBOSPARK_ISA).
#include "backend/cpu/matmul_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "backend/cpu/activations.h"
#include "backend/cpu/matmul_kernels_impl.h"
#include "backend/cpu/matmul_lowbit.h"
#include "backend/cpu/matmul_mxfp4.h"
#include "backend/cpu/panel_layout.h"
#include "core/checked.h"
#include "core/error.h"
#include "quant/blocks.h"
#include "quant/quantize.h"

namespace ts::cpu {
namespace {

// The low-bit types too (unless TURBOSPARK_ACTS=f32 keeps their activations in f32).
bool is_q8k_type(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K ||
         t == DType::Q6_K || t == DType::IQ4_XS || is_lowbit_type(t);
}

bool is_float_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

#if defined(__x86_64__)
// Not every compiler's __builtin_cpu_supports knows F16C (clang 14 does not): CPUID leaf 1.
// cpuid traps to the hypervisor in a VM: asked once, not on every matmul (it showed in a batched
// decode profile: docs/PERFORMANCE.md, "Measured choices").
bool cpu_has_f16c() {
  static const bool has = [] {
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return has;
}
#endif

bool cpu_has_vnni() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool cpu_has_vbmi() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512vbmi");
#else
  return false;
#endif
}

RowsKernel kernel_for(Isa isa, DType t, int64_t M) {
  if (t == DType::MXFP4 && f32_activations_requested())
    return isa == Isa::Scalar ? mxfp4_kernel_scalar() : mxfp4_kernel_avx2();
  if (is_lowbit_type(t) && f32_activations_requested()) {
    if (isa == Isa::Scalar) return lowbit_kernel_scalar();
    return isa == Isa::Avx2 ? lowbit_kernel_avx2() : lowbit_kernel_avx512();
  }
  RowsKernel k = nullptr;
  switch (isa) {
    case Isa::Avx512:
      if (M >= kGemmMinRows && cpu_has_vnni()) {
        k = avx512vnni_gemm_kernel(t);
        if (k == nullptr) k = avx512vnni_kgemm_kernel(t);
      }
      if (k != nullptr) break;
      if (is_float_type(t))
        k = avx512_float_kernel(t);
      else if (!cpu_has_vnni())
        k = avx2_kernel(t);
      else {
        if (cpu_has_vbmi()) k = avx512vbmi_lowbit_kernel(t);  // iq3_xxs
        if (k == nullptr) k = avx512vnni_int_kernel(t);
      }
      break;
    case Isa::Avx2:
      k = avx2_kernel(t);
      break;
    case Isa::Scalar:
      k = scalar_kernel(t);
      break;
  }
  if (k == nullptr)
    fail(ErrorKind::Unsupported,
         std::string("matmul: no CPU kernel for weight type ") + dtype_name(t));
  return k;
}

void check_args(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1) {
  if (x.wtype != w.dtype)
    fail(ErrorKind::Runtime, std::string("matmul_rows: activations packed for ") +
                                 dtype_name(x.wtype) + " but the weight is " + dtype_name(w.dtype));
  if (x.K != w.cols)
    fail(ErrorKind::Runtime, "matmul_rows: activation width " + std::to_string(x.K) +
                                 " != weight columns " + std::to_string(w.cols));
  if (r0 < 0 || r0 > r1 || r1 > w.rows)
    fail(ErrorKind::Runtime, "matmul_rows: row range [" + std::to_string(r0) + ", " +
                                 std::to_string(r1) + ") outside " + std::to_string(w.rows) +
                                 " weight rows");
  if (w.layout == WeightLayout::Panels &&
      (!panel_layout_fits(w.dtype, w.rows) || r0 % kPanelRows != 0 || r1 % kPanelRows != 0))
    fail(ErrorKind::Runtime, "matmul_rows: a " + std::string(dtype_name(w.dtype)) + " weight of " +
                                 std::to_string(w.rows) + " rows in the panel layout, rows [" +
                                 std::to_string(r0) + ", " + std::to_string(r1) +
                                 "): needs a panel type (panel_layout.h) and whole panels of " +
                                 std::to_string(kPanelRows) + " rows");
}

// The kernel for a weight in the panel layout: only the AVX512-VNNI ones read it.
RowsKernel panel_kernel_for(Isa isa, DType t, int64_t M) {
  if (isa != Isa::Avx512 || !cpu_has_vnni())
    fail(ErrorKind::Unsupported, std::string("matmul: a weight in the panel layout needs the "
                                             "AVX512-VNNI kernels, not the ") +
                                     isa_name(isa) + " path");
  switch (t) {
    case DType::Q4_0:
    case DType::IQ4_NL:
    case DType::Q5_0:
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::MXFP4:
      return avx512vnni_nibble_panel_kernel(t, M);
    case DType::Q4_K:
      return avx512vnni_q4k_panel_kernel(M);
    case DType::Q5_K:
      return avx512vnni_q5k_panel_kernel(M);
    case DType::Q6_K:
      return avx512vnni_q6k_panel_kernel(M);
    case DType::IQ4_XS:
      return avx512vnni_iq4xs_panel_kernel(M);
    default:
      return avx512vnni_panel_kernel(M);
  }
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx2:
      return "avx2";
    case Isa::Scalar:
      return "scalar";
  }
  return "scalar";
}

bool isa_available(Isa isa) {
#if defined(__x86_64__)
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return avx2;
    case Isa::Avx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  return isa == Isa::Scalar;
#endif
}

Isa resolve_isa(const char* requested) {
  Isa best = Isa::Scalar;
  if (isa_available(Isa::Avx512))
    best = Isa::Avx512;
  else if (isa_available(Isa::Avx2))
    best = Isa::Avx2;
  if (requested == nullptr || *requested == '\0') return best;
  const std::string want = requested;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (want != isa_name(isa)) continue;
    if (!isa_available(isa))
      fail(ErrorKind::Usage, "TURBOSPARK_ISA=" + want + ": this CPU does not support it (best is " +
                                 isa_name(best) + ")");
    return isa;
  }
  fail(ErrorKind::Usage, "TURBOSPARK_ISA=" + want + ": expected scalar, avx2 or avx512");
}

Isa active_isa() {
  static const Isa isa = resolve_isa(std::getenv("TURBOSPARK_ISA"));
  return isa;
}

const char* matmul_isa() {
  return isa_name(active_isa());
}

bool f32_activations_requested() {
  static const bool f32 = [] {
    const char* v = std::getenv("TURBOSPARK_ACTS");
    if (v == nullptr || *v == '\0' || std::string(v) == "q8") return false;
    if (std::string(v) == "f32") return true;
    fail(ErrorKind::Usage, std::string("TURBOSPARK_ACTS=") + v + ": expected f32 or q8");
  }();
  return f32;
}

bool takes_f32_activations(DType t) {
  return is_float_type(t) ||
         ((t == DType::MXFP4 || is_lowbit_type(t)) && f32_activations_requested());
}

namespace {

// Sets out's shape and sizes its buffer; false when the weight type takes the f32 rows as they are.
bool shape_packing(DType wtype, const float* x, int64_t M, int64_t K, PackedActs& out) {
  out.wtype = wtype;
  out.M = M;
  out.K = K;
  out.planes = 1;
  out.f32 = nullptr;
  if (takes_f32_activations(wtype)) {
    if (wtype == DType::MXFP4 && K % kQK32 != 0)
      fail(ErrorKind::Model,
           "matmul: " + std::to_string(K) + " columns is not a whole number of mxfp4 blocks of 32");
    if (is_lowbit_type(wtype) && K % kQKK != 0)
      fail(ErrorKind::Model, "matmul: " + std::to_string(K) + " columns is not a whole number of " +
                                 dtype_name(wtype) + " blocks of 256");
    out.row_bytes = checked_mul(static_cast<uint64_t>(K), sizeof(float), "matmul activations");
    out.f32 = x;
    return false;
  }
  const bool k_quant = is_q8k_type(wtype);
  const int64_t block = k_quant ? kQKK : kQK32;
  if (K % block != 0)
    fail(ErrorKind::Model, "matmul: " + std::to_string(K) + " columns is not a whole number of " +
                               dtype_name(wtype) + " blocks of " + std::to_string(block));
  const size_t block_bytes = k_quant ? sizeof(BlockQ8K) : sizeof(BlockQ8A32);
  out.planes = wtype == DType::MXFP4 ? 2 : 1;
  out.M = M * out.planes;
  out.row_bytes = checked_mul(static_cast<uint64_t>(K / block), block_bytes, "matmul activations");
  out.data.resize(checked_mul(out.row_bytes, static_cast<uint64_t>(out.M), "matmul activations"));
  return true;
}

void quantize_row_q8a32_active(const float* x, BlockQ8A32* y, int64_t n) {
  if (active_isa() == Isa::Avx512)
    quantize_row_q8a32_avx512(x, y, n);
  else
    quantize_row_q8a32(x, y, n);
}

// Activation rows [m0, m1) of x (the packing's M / planes rows). The second plane rounds the first
// one's error, x - d q, which the fused multiply-add gives exactly (|x - d q| <= d / 2 needs no
// more bits than d).
void quantize_rows(const float* x, int64_t m0, int64_t m1, PackedActs& out) {
  const int64_t rows = out.M / out.planes;
  thread_local std::vector<float> rest;
  if (out.planes > 1) rest.resize(static_cast<size_t>(out.K));
  for (int64_t m = m0; m < m1; ++m) {
    const float* xm = x + m * out.K;
    uint8_t* row = out.data.data() + m * out.row_bytes;
    if (is_q8k_type(out.wtype)) {
      quantize_row_q8k(xm, reinterpret_cast<BlockQ8K*>(row), out.K);
      continue;
    }
    auto* blocks = reinterpret_cast<BlockQ8A32*>(row);
    quantize_row_q8a32_active(xm, blocks, out.K);
    if (out.planes == 1) continue;
    for (int64_t k = 0; k < out.K; ++k) {
      const BlockQ8A32& b = blocks[k / kQK32];
      rest[static_cast<size_t>(k)] = std::fma(-b.d, static_cast<float>(b.qs[k % kQK32]), xm[k]);
    }
    quantize_row_q8a32_active(rest.data(),
                              reinterpret_cast<BlockQ8A32*>(row + rows * out.row_bytes), out.K);
  }
}

// A weight against two-plane activations: both planes' products for a piece of rows [r0, r1) at a
// time into a buffer (a few hundred KB for a prompt's micro-batch), then their sum, the first
// plane's plus the second's. Pieces of whole panels, so that a packed weight's views stay panels.
void two_plane_rows(RowsKernel k, const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1,
                    float* y, int64_t ldy) {
  constexpr int64_t kPiece = 2 * kPanelRows;
  const int64_t rows = x.M / 2;
  thread_local std::vector<float> both;
  both.resize(static_cast<size_t>(x.M * kPiece));
  for (int64_t p0 = r0; p0 < r1; p0 += kPiece) {
    const int64_t n = std::min(kPiece, r1 - p0);
    WeightView part = w;
    part.data = w.data + p0 * w.row_stride;
    part.rows = n;
    k(part, x, 0, n, both.data(), n);
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t i = 0; i < n; ++i)
        y[m * ldy + p0 + i] =
            both[static_cast<size_t>(m * n + i)] + both[static_cast<size_t>((rows + m) * n + i)];
  }
}

}  // namespace

void pack_activations(DType wtype, const float* x, int64_t M, int64_t K, PackedActs& out) {
  if (shape_packing(wtype, x, M, K, out)) quantize_rows(x, 0, M, out);
}

void pack_activations_parallel(ThreadPool& pool, DType wtype, const float* x, int64_t M, int64_t K,
                               PackedActs& out) {
  if (shape_packing(wtype, x, M, K, out))
    pool.parallel_for(M, [&](int64_t m0, int64_t m1) { quantize_rows(x, m0, m1, out); });
}

void matmul_rows_isa(Isa isa, const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1,
                     float* y, int64_t ldy) {
  if (!isa_available(isa))
    fail(ErrorKind::Unsupported, std::string("matmul: this CPU lacks ") + isa_name(isa));
  check_args(w, x, r0, r1);
  if (r0 == r1 || x.M == 0) return;
  const RowsKernel k = w.layout == WeightLayout::Panels ? panel_kernel_for(isa, w.dtype, x.M)
                                                        : kernel_for(isa, w.dtype, x.M);
  if (x.planes == 2) return two_plane_rows(k, w, x, r0, r1, y, ldy);
  k(w, x, r0, r1, y, ldy);
}

bool panel_kernels_active() {
  return active_isa() == Isa::Avx512 && cpu_has_vnni();
}

void pack_panels(DType t, uint8_t* data, int64_t rows, int64_t cols, size_t row_stride, int64_t p0,
                 int64_t p1) {
  if (!panel_kernels_active())
    fail(ErrorKind::Unsupported, "pack_panels: the panel layout needs the AVX512-VNNI kernels");
  if (!panel_layout_fits(t, rows) || p0 < 0 || p0 > p1 || p1 > rows / kPanelRows)
    fail(ErrorKind::Runtime, "pack_panels: panels [" + std::to_string(p0) + ", " +
                                 std::to_string(p1) + ") of a " + dtype_name(t) + " weight of " +
                                 std::to_string(rows) + " rows");
  if (row_stride != row_bytes(t, cols, "pack_panels"))
    fail(ErrorKind::Runtime, "pack_panels: rows of " + std::to_string(row_stride) +
                                 " bytes are not the " + dtype_name(t) + " rows of " +
                                 std::to_string(cols) +
                                 " columns (a panel holds exactly its rows)");
  switch (t) {
    case DType::Q4_0:
    case DType::IQ4_NL:
    case DType::Q5_0:
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::MXFP4:
      return avx512vnni_pack_nibble_panels(t, data, cols, row_stride, p0, p1);
    case DType::Q4_K:
      return avx512vnni_pack_q4k_panels(data, cols, row_stride, p0, p1);
    case DType::Q5_K:
      return avx512vnni_pack_q5k_panels(data, cols, row_stride, p0, p1);
    case DType::Q6_K:
      return avx512vnni_pack_q6k_panels(data, cols, row_stride, p0, p1);
    case DType::IQ4_XS:
      return avx512vnni_pack_iq4xs_panels(data, cols, row_stride, p0, p1);
    default:
      return avx512vnni_pack_panels(data, cols, row_stride, p0, p1);
  }
}

void matmul_rows(const WeightView& w, const PackedActs& x, int64_t r0, int64_t r1, float* y,
                 int64_t ldy) {
  matmul_rows_isa(active_isa(), w, x, r0, r1, y, ldy);
}

}  // namespace ts::cpu
