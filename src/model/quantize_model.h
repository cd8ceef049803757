// `turbospark quantize`: a GGUF of f32 / f16 / bf16 weights rewritten in another type, each tensor
// given the type llama.cpp's llama-quantize gives it for that file type (its tensor rules for the
// types written here; see plan_quantize). The quantisers are quant/quantize.h's (round to nearest,
// no importance matrix).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quant/dtype.h"

namespace ts {

class GgufFile;

// The file types `quantize` writes, by llama.cpp's names (lower case): f16, bf16, q8_0, q4_0,
// q4_1, q5_0, q5_1, q6_k.
struct QuantizeType {
  std::string name;
  DType dtype;        // the type of most weight matrices
  int64_t file_type;  // general.file_type (llama_ftype)
};
const std::vector<QuantizeType>& quantize_types();
std::string quantize_type_names();

struct QuantizePlanEntry {
  std::string name;
  DType from;
  DType to;  // == from: copied
};

// The type of every tensor of `src` for `type`, in file order: llama.cpp's rules for these file
// types. Matrices named *.weight are quantised except norms and the MoE router (ffn_gate_inp);
// output.weight (or a tied token_embd.weight) becomes q6_k unless the type is q8_0 or a float,
// q8_0 where its rows are not whole blocks; in a model of exactly 8 experts attn_k and attn_v
// become q8_0; a row that is not a whole number of the type's blocks falls back (q6_k -> q8_0).
// Fails (Model) on a matrix to quantise that is not f32, f16 or bf16.
std::vector<QuantizePlanEntry> plan_quantize(const GgufFile& src, const QuantizeType& type);

struct QuantizeSummary {
  int64_t tensors = 0;
  int64_t quantized = 0;
  uint64_t bytes = 0;  // of the output file
};

// Writes `out`: src's metadata (general.file_type and general.quantization_version set, split.*
// dropped) and tensors as planned, rows quantised on `threads` threads. `progress(done, total)`
// is called with bytes of source tensors processed.
QuantizeSummary write_quantized(const GgufFile& src, const QuantizeType& type,
                                const std::string& out, int threads,
                                const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace ts
