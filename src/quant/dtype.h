// Tensor element types, numbered as GGML numbers them (the GGUF tensor-info type field), with
// their block geometry. A quantised row of n elements occupies n / block_elems * block_bytes bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ts {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  // Types with no GGML id: they come only from safetensors files. Numbered far above GGML's ids
  // so that a GGUF tensor-info type field can never name them.
  U8 = 0x10000,
  Bool = 0x10001,
  F8_E4M3 = 0x10002,  // FP8 (1 sign, 4 exponent, 3 mantissa bits), block-scaled checkpoints
};

struct DTypeInfo {
  const char* name;
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
};

// Geometry of a GGML type id, or nullopt for an id this build does not know at all (and for the
// safetensors-only types above, which have no GGML id).
std::optional<DTypeInfo> dtype_info(uint32_t ggml_type);
const DTypeInfo& dtype_info(DType t);
const char* dtype_name(DType t);
std::optional<DType> dtype_from_name(const std::string& name);  // "q8_0", "bf16", ... (lower case)

// Bytes of a row of `n` elements; fails (naming `what`) when n is not a whole number of blocks.
uint64_t row_bytes(DType t, uint64_t n, const std::string& what);

// Types the matmul kernels can use as weights.
bool is_weight_dtype_supported(DType t);

// The low-bit types: iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, tq1_0, tq2_0
// (256-element blocks of 1.56..3.44 bits an element, decoded through grids or trits).
bool is_lowbit_dtype(DType t);

}  // namespace ts
