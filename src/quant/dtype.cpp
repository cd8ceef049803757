#include "quant/dtype.h"

#include <array>
#include <cctype>

#include "core/checked.h"
#include "core/error.h"

namespace ts {
namespace {

struct Entry {
  DType type;
  DTypeInfo info;
};

// Block sizes from the GGML block structs: e.g. q4_k is 2 f16 (d, dmin) + 12 scale bytes + 128
// nibble bytes = 144 bytes per 256 elements. Every GGML weight type is listed, also those without
// kernels here (most i-quants, the ternary and fp4 types), so that a file holding one opens to an
// error naming its type rather than an unknown id.
constexpr std::array<Entry, 35> kTable = {{
    {DType::F32, {"f32", 1, 4}},
    {DType::F16, {"f16", 1, 2}},
    {DType::Q4_0, {"q4_0", 32, 18}},
    {DType::Q4_1, {"q4_1", 32, 20}},
    {DType::Q5_0, {"q5_0", 32, 22}},
    {DType::Q5_1, {"q5_1", 32, 24}},
    {DType::Q8_0, {"q8_0", 32, 34}},
    {DType::Q8_1, {"q8_1", 32, 36}},
    {DType::Q2_K, {"q2_k", 256, 84}},
    {DType::Q3_K, {"q3_k", 256, 110}},
    {DType::Q4_K, {"q4_k", 256, 144}},
    {DType::Q5_K, {"q5_k", 256, 176}},
    {DType::Q6_K, {"q6_k", 256, 210}},
    {DType::Q8_K, {"q8_k", 256, 292}},
    {DType::IQ2_XXS, {"iq2_xxs", 256, 66}},
    {DType::IQ2_XS, {"iq2_xs", 256, 74}},
    {DType::IQ3_XXS, {"iq3_xxs", 256, 98}},
    {DType::IQ1_S, {"iq1_s", 256, 50}},
    {DType::IQ4_NL, {"iq4_nl", 32, 18}},
    {DType::IQ3_S, {"iq3_s", 256, 110}},
    {DType::IQ2_S, {"iq2_s", 256, 82}},
    {DType::IQ4_XS, {"iq4_xs", 256, 136}},
    {DType::I8, {"i8", 1, 1}},
    {DType::I16, {"i16", 1, 2}},
    {DType::I32, {"i32", 1, 4}},
    {DType::I64, {"i64", 1, 8}},
    {DType::F64, {"f64", 1, 8}},
    {DType::IQ1_M, {"iq1_m", 256, 56}},
    {DType::BF16, {"bf16", 1, 2}},
    {DType::TQ1_0, {"tq1_0", 256, 54}},
    {DType::TQ2_0, {"tq2_0", 256, 66}},
    {DType::MXFP4, {"mxfp4", 32, 17}},
    {DType::U8, {"u8", 1, 1}},
    {DType::Bool, {"bool", 1, 1}},
    {DType::F8_E4M3, {"f8_e4m3", 1, 1}},
}};

constexpr uint32_t kFirstNonGgmlId = static_cast<uint32_t>(DType::U8);

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t ggml_type) {
  if (ggml_type >= kFirstNonGgmlId) return std::nullopt;
  for (const auto& e : kTable)
    if (static_cast<uint32_t>(e.type) == ggml_type) return e.info;
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType t) {
  for (const auto& e : kTable)
    if (e.type == t) return e.info;
  fail(ErrorKind::Unsupported, "unknown dtype id " + std::to_string(static_cast<uint32_t>(t)));
}

const char* dtype_name(DType t) {
  return dtype_info(t).name;
}

std::optional<DType> dtype_from_name(const std::string& name) {
  std::string lower;
  for (char c : name)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const auto& e : kTable)
    if (lower == e.info.name) return e.type;
  return std::nullopt;
}

uint64_t row_bytes(DType t, uint64_t n, const std::string& what) {
  const DTypeInfo& info = dtype_info(t);
  if (n % info.block_elems != 0)
    fail(ErrorKind::Model, what + ": row of " + std::to_string(n) +
                               " elements is not a whole number of " + info.name + " blocks of " +
                               std::to_string(info.block_elems));
  return checked_mul(n / info.block_elems, info.block_bytes, what);
}

bool is_weight_dtype_supported(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4:
      return true;
    default:
      return is_lowbit_dtype(t);
  }
}

bool is_lowbit_dtype(DType t) {
  switch (t) {
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::TQ1_0:
    case DType::TQ2_0:
      return true;
    default:
      return false;
  }
}

}  // namespace ts
