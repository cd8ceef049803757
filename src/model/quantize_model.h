// `turbospark quantize`: a GGUF of f32 / f16 / bf16 weights rewritten in another type, each tensor
// given the type llama.cpp's llama-quantize gives it for that file type (its mixes by name, with
// its tensor rules: model/quantize_rules.h), rows quantised by llama.cpp's quantisers
// (quant/quantize_search.h), weighted by an importance matrix where one is given.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quant/dtype.h"

namespace ts {

class GgufFile;
class Imatrix;

// The file types `quantize` writes, by llama-quantize's names (lower case, its aliases q3_k,
// q4_k, q5_k included): f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q2_k_s, q3_k_s/m/l,
// q4_k_s/m, q5_k_s/m, q6_k, iq4_nl, iq4_xs, tq1_0, tq2_0, iq3_xxs, iq3_s, iq3_m, iq2_xxs,
// iq2_xs, iq2_s (its default type iq2_xs, as llama.cpp's), iq2_m (iq2_s), iq1_s, iq1_m.
struct QuantizeType {
  std::string name;
  DType dtype;                 // the type of most weight matrices
  int64_t file_type;           // general.file_type (llama_ftype)
  bool needs_imatrix = false;  // q2_k_s, as llama.cpp: without one its q2_k tensors are garbage
};
const std::vector<QuantizeType>& quantize_types();
std::string quantize_type_names();

struct QuantizePlanEntry {
  std::string name;
  DType from;
  DType to;  // == from: copied
};

// The type of every tensor of `src` for `type`, in file order: llama.cpp's rules. Matrices named
// *.weight are quantised except norms and the MoE router (ffn_gate_inp); each takes the mix's
// type for its kind and layer (mix_tensor_type: output.weight q6_k, attn_v / ffn_down upgraded by
// layer position, attn_k / attn_v q8_0 in a model of 8 experts, ...), and a row that is not whole
// blocks of it falls back (q4_k -> q5_0, q6_k -> q8_0, ...). `with_imatrix` selects the rules
// that differ with an importance matrix. Fails (Model) on a matrix to quantise that is not f32,
// f16 or bf16.
std::vector<QuantizePlanEntry> plan_quantize(const GgufFile& src, const QuantizeType& type,
                                             bool with_imatrix = false);

struct QuantizeSummary {
  int64_t tensors = 0;
  int64_t quantized = 0;
  uint64_t bytes = 0;  // of the output file
};

// Writes `out`: src's metadata (general.file_type and general.quantization_version set, split.*
// dropped) and tensors as planned, rows quantised on `threads` threads, each weighted by its
// imatrix entry where `imatrix` has one (an expert's rows by that expert's). `progress(done,
// total)` is called with bytes of source tensors processed. Fails (Usage) for a type that needs
// an imatrix without one (q2_k_s; a tensor of a type that type_needs_imatrix), (Model) on an
// imatrix entry whose size is not the tensor's columns times experts or that such a tensor lacks.
QuantizeSummary write_quantized(const GgufFile& src, const QuantizeType& type,
                                const Imatrix* imatrix, const std::string& out, int threads,
                                const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace ts
