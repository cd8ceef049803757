#include "model/quantize_model.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string_view>

#include "core/checked.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "quant/row_fallback.h"

namespace ts {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// llama.cpp's test for a tensor it quantises (llama_model_quantize_impl): a matrix named *.weight,
// not a norm, not the MoE router, not a position or token-type embedding.
bool quantizable(const GgufTensor& t) {
  const std::string& n = t.name;
  return ends_with(n, "weight") && t.dims.size() >= 2 && !contains(n, "_norm.weight") &&
         !contains(n, "ffn_gate_inp.weight") && !contains(n, "position_embd") &&
         !contains(n, "token_types");
}

// llama_tensor_get_type's rules for the file types written here (q8_0, q4_0, q4_1, q5_0, q5_1,
// q6_k): the others in its list name only the k-quant mixes and the i-quants.
DType tensor_type(const GgufTensor& t, DType base, bool has_output, int64_t n_expert) {
  DType to = base;
  const std::string& n = t.name;
  const uint64_t block = dtype_info(base).block_elems;
  if (n == "output.weight" || (!has_output && n == "token_embd.weight")) {
    if (t.dims[0] % block != 0)
      to = DType::Q8_0;
    else if (base != DType::Q8_0)
      to = DType::Q6_K;
  } else if (contains(n, "attn_v.weight") || contains(n, "attn_k.weight")) {
    // "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
    if (n_expert == 8) to = DType::Q8_0;
  }
  return row_fallback_dtype(to, t.dims[0]);
}

}  // namespace

const std::vector<QuantizeType>& quantize_types() {
  // llama_ftype ids: LLAMA_FTYPE_MOSTLY_F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 7, Q5_0 = 8,
  // Q5_1 = 9, Q6_K = 18, BF16 = 32.
  static const std::vector<QuantizeType> types = {
      {"f16", DType::F16, 1},   {"bf16", DType::BF16, 32}, {"q8_0", DType::Q8_0, 7},
      {"q4_0", DType::Q4_0, 2}, {"q4_1", DType::Q4_1, 3},  {"q5_0", DType::Q5_0, 8},
      {"q5_1", DType::Q5_1, 9}, {"q6_k", DType::Q6_K, 18},
  };
  return types;
}

std::string quantize_type_names() {
  std::string s;
  for (const QuantizeType& t : quantize_types()) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

std::vector<QuantizePlanEntry> plan_quantize(const GgufFile& src, const QuantizeType& type) {
  const bool has_output = src.tensor("output.weight") != nullptr;
  int64_t n_expert = 0;
  if (const auto arch = src.get_string("general.architecture"))
    n_expert = src.get_int(*arch + ".expert_count").value_or(0);
  std::vector<QuantizePlanEntry> plan;
  for (const GgufTensor& t : src.tensors()) {
    QuantizePlanEntry e{t.name, t.dtype, t.dtype};
    if (quantizable(t)) {
      if (!is_float(t.dtype))
        fail(ErrorKind::Model, src.path() + ": tensor '" + t.name + "' is " + dtype_name(t.dtype) +
                                   ": quantize takes f32, f16 or bf16 weights (a quantised file "
                                   "would be quantised twice)");
      e.to = is_float(type.dtype) ? type.dtype : tensor_type(t, type.dtype, has_output, n_expert);
      if (t.dims[0] % dtype_info(e.to).block_elems != 0)
        fail(ErrorKind::Model, src.path() + ": tensor '" + t.name + "': rows of " +
                                   std::to_string(t.dims[0]) + " are not whole " +
                                   dtype_name(e.to) + " blocks");
    }
    plan.push_back(std::move(e));
  }
  return plan;
}

QuantizeSummary write_quantized(const GgufFile& src, const QuantizeType& type,
                                const std::string& out, int threads,
                                const std::function<void(uint64_t, uint64_t)>& progress) {
  const std::vector<QuantizePlanEntry> plan = plan_quantize(src, type);
  GgufWriter w(src.version());
  for (const auto& [key, value] : src.metadata()) {
    if (key == "general.alignment" || key == "general.file_type" ||
        key == "general.quantization_version" || key.rfind("split.", 0) == 0)
      continue;
    w.add_kv(key, value);
  }
  w.add_kv("general.quantization_version", gguf_int(GgufType::U32, 2));
  w.add_kv("general.file_type", gguf_int(GgufType::U32, type.file_type));
  w.set_alignment(static_cast<uint32_t>(src.alignment()));
  const uint64_t align = src.alignment();
  std::vector<uint64_t> offsets, sizes;
  uint64_t data = 0, total_in = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const GgufTensor& t = src.tensors()[i];
    const uint64_t rows = t.elements() / t.dims[0];
    const uint64_t nbytes = checked_mul(row_bytes(plan[i].to, t.dims[0], t.name), rows, t.name);
    w.add_raw_tensor_info(t.name, static_cast<uint32_t>(plan[i].to), t.dims, data);
    offsets.push_back(data);
    sizes.push_back(nbytes);
    data = (data + nbytes + align - 1) / align * align;
    total_in += t.nbytes;
  }
  const std::vector<uint8_t> header = w.bytes();  // ends at the aligned start of the data
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f) fail(ErrorKind::Usage, out + ": cannot open for writing");
  f.write(reinterpret_cast<const char*>(header.data()),
          static_cast<std::streamsize>(header.size()));

  ThreadPool pool(std::max(1, threads));
  QuantizeSummary s;
  uint64_t done_in = 0;
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < plan.size(); ++i) {
    const GgufTensor& t = src.tensors()[i];
    const QuantizePlanEntry& e = plan[i];
    buf.assign(sizes[i], 0);
    if (e.to == e.from) {
      std::memcpy(buf.data(), src.tensor_data(t), t.nbytes);
    } else {
      const int64_t cols = static_cast<int64_t>(t.dims[0]);
      const int64_t rows = static_cast<int64_t>(t.elements() / t.dims[0]);
      const size_t in_row = row_bytes(e.from, t.dims[0], t.name);
      const size_t out_row = row_bytes(e.to, t.dims[0], t.name);
      const uint8_t* in = src.tensor_data(t);
      pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t r = r0; r < r1; ++r) {
          dequantize_row(e.from, in + r * in_row, row.data(), cols);
          quantize_row_weights(e.to, row.data(), buf.data() + r * out_row, cols);
        }
      });
      ++s.quantized;
    }
    const uint64_t pos = header.size() + offsets[i];
    f.seekp(static_cast<std::streamoff>(pos));
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    done_in += t.nbytes;
    if (progress) progress(done_in, total_in);
  }
  // The last tensor's padding, so the file ends on the alignment as the writer's files do.
  const uint64_t end = header.size() + data;
  f.seekp(0, std::ios::end);
  const auto written = static_cast<uint64_t>(f.tellp());
  if (written < end) {
    const std::vector<char> pad(end - written, 0);
    f.write(pad.data(), static_cast<std::streamsize>(pad.size()));
  }
  f.close();
  if (!f) fail(ErrorKind::Runtime, out + ": write failed");
  s.tensors = static_cast<int64_t>(plan.size());
  s.bytes = end;
  return s;
}

}  // namespace ts
