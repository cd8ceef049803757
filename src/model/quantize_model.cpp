#include "model/quantize_model.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string_view>

#include "core/checked.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/imatrix.h"
#include "model/quantize_rules.h"
#include "quant/dequant.h"
#include "quant/quantize_search.h"

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

// The layer of a tensor named "blk.N...." (-1 for the others): llama.cpp visits tensors by layer,
// then name, and counts attn_v and ffn_down tensors in that order.
int layer_index(const std::string& name) {
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  return layer;
}

MixModel mix_model(const GgufFile& src, bool with_imatrix) {
  MixModel m;
  m.tied_output = src.tensor("output.weight") == nullptr;
  m.has_imatrix = with_imatrix;
  const auto arch = src.get_string("general.architecture");
  if (!arch) return m;
  const auto key = [&](const char* k) { return src.get_int(*arch + "." + k); };
  m.n_expert = key("expert_count").value_or(0);
  m.n_layer = key("block_count").value_or(0);
  const int64_t heads = key("attention.head_count").value_or(0);
  const int64_t kv_heads = key("attention.head_count_kv").value_or(heads);
  m.n_gqa = kv_heads > 0 ? heads / kv_heads : 1;
  m.is_70b = *arch == "llama" && m.n_layer == 80 && heads != kv_heads;
  return m;
}

// The importance rows of tensor t (cols x experts values), or null where the imatrix has none.
const float* importance_of(const Imatrix* imatrix, const GgufTensor& t) {
  if (imatrix == nullptr) return nullptr;
  const std::vector<float>* v = imatrix->find(t.name);
  if (v == nullptr) return nullptr;
  const uint64_t experts = t.dims.size() > 2 ? t.dims[2] : 1;
  if (v->size() == t.dims[0] * experts) return v->data();
  // llama.cpp lets token_embd's mismatch pass: its rows are looked up, not multiplied.
  if (t.name == "token_embd.weight") return nullptr;
  fail(ErrorKind::Model, "quantize: imatrix entry '" + t.name + "' has " +
                             std::to_string(v->size()) + " values for " +
                             std::to_string(t.dims[0]) + " columns x " + std::to_string(experts) +
                             " experts");
}

}  // namespace

const std::vector<QuantizeType>& quantize_types() {
  using namespace ftype;
  static const std::vector<QuantizeType> types = {
      {"f16", DType::F16, kF16},
      {"bf16", DType::BF16, kBF16},
      {"q8_0", DType::Q8_0, kQ8_0},
      {"q4_0", DType::Q4_0, kQ4_0},
      {"q4_1", DType::Q4_1, kQ4_1},
      {"q5_0", DType::Q5_0, kQ5_0},
      {"q5_1", DType::Q5_1, kQ5_1},
      {"q2_k", DType::Q2_K, kQ2_K},
      {"q2_k_s", DType::Q2_K, kQ2_K_S, true},
      {"q3_k_s", DType::Q3_K, kQ3_K_S},
      {"q3_k_m", DType::Q3_K, kQ3_K_M},
      {"q3_k", DType::Q3_K, kQ3_K_M},
      {"q3_k_l", DType::Q3_K, kQ3_K_L},
      {"q4_k_s", DType::Q4_K, kQ4_K_S},
      {"q4_k_m", DType::Q4_K, kQ4_K_M},
      {"q4_k", DType::Q4_K, kQ4_K_M},
      {"q5_k_s", DType::Q5_K, kQ5_K_S},
      {"q5_k_m", DType::Q5_K, kQ5_K_M},
      {"q5_k", DType::Q5_K, kQ5_K_M},
      {"q6_k", DType::Q6_K, kQ6_K},
      {"iq4_nl", DType::IQ4_NL, kIQ4_NL},
      {"iq4_xs", DType::IQ4_XS, kIQ4_XS},
      {"tq1_0", DType::TQ1_0, kTQ1_0},
      {"tq2_0", DType::TQ2_0, kTQ2_0},
      {"iq3_xxs", DType::IQ3_XXS, kIQ3_XXS},
      {"iq3_s", DType::IQ3_S, kIQ3_S},
      {"iq3_m", DType::IQ3_S, kIQ3_M},
      {"iq2_xxs", DType::IQ2_XXS, kIQ2_XXS},
      {"iq2_xs", DType::IQ2_XS, kIQ2_XS},
      {"iq2_s", DType::IQ2_XS, kIQ2_S},
      {"iq2_m", DType::IQ2_S, kIQ2_M},
      {"iq1_s", DType::IQ1_S, kIQ1_S},
      {"iq1_m", DType::IQ1_M, kIQ1_M},
  };
  return types;
}

std::string quantize_type_names() {
  std::string s;
  for (const QuantizeType& t : quantize_types()) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

std::vector<QuantizePlanEntry> plan_quantize(const GgufFile& src, const QuantizeType& type,
                                             bool with_imatrix) {
  const MixModel model = mix_model(src, with_imatrix);
  const auto& tensors = src.tensors();
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = layer_index(tensors[a].name), lb = layer_index(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  MixPosition pos;
  for (const GgufTensor& t : tensors) pos.n_attn_v += is_attn_v_like(t.name) ? 1 : 0;
  std::vector<QuantizePlanEntry> plan(tensors.size());
  for (size_t i : order) {
    const GgufTensor& t = tensors[i];
    QuantizePlanEntry& e = plan[i];
    e = {t.name, t.dtype, t.dtype};
    if (!quantizable(t)) continue;
    if (!is_float(t.dtype))
      fail(ErrorKind::Model, src.path() + ": tensor '" + t.name + "' is " + dtype_name(t.dtype) +
                                 ": quantize takes f32, f16 or bf16 weights (a quantised file "
                                 "would be quantised twice)");
    if (is_float(type.dtype)) {
      e.to = type.dtype;
      continue;
    }
    e.to = mix_tensor_type(type.file_type, type.dtype, t.name, t.dims[0], model, pos);
    if (is_attn_v_like(t.name)) ++pos.i_attn_v;
    if (is_ffn_down(t.name)) ++pos.i_ffn_down;
    if (t.dims[0] % dtype_info(e.to).block_elems != 0)
      fail(ErrorKind::Model, src.path() + ": tensor '" + t.name + "': rows of " +
                                 std::to_string(t.dims[0]) + " are not whole " + dtype_name(e.to) +
                                 " blocks");
  }
  return plan;
}

QuantizeSummary write_quantized(const GgufFile& src, const QuantizeType& type,
                                const Imatrix* imatrix, const std::string& out, int threads,
                                const std::function<void(uint64_t, uint64_t)>& progress) {
  if (type.needs_imatrix && imatrix == nullptr)
    fail(ErrorKind::Usage,
         "quantize: " + type.name + " needs an importance matrix (--imatrix FILE), as llama.cpp's");
  const std::vector<QuantizePlanEntry> plan = plan_quantize(src, type, imatrix != nullptr);
  for (const QuantizePlanEntry& e : plan) {
    if (e.to == e.from || !type_needs_imatrix(e.name, e.to)) continue;
    if (imatrix == nullptr)
      fail(ErrorKind::Usage, "quantize: " + type.name +
                                 " needs an importance matrix (--imatrix FILE), as llama.cpp's (" +
                                 e.name + " is " + dtype_name(e.to) + ")");
    if (imatrix->find(e.name) == nullptr)
      fail(ErrorKind::Model, "quantize: the imatrix has no entry for '" + e.name + "', which " +
                                 dtype_name(e.to) + " needs");
  }
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
  std::vector<const float*> importance;  // checked before the output is opened
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
    importance.push_back(plan[i].to != plan[i].from ? importance_of(imatrix, t) : nullptr);
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
      const auto rows_per_expert = static_cast<int64_t>(t.dims.size() > 1 ? t.dims[1] : 1);
      pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t r = r0; r < r1; ++r) {
          dequantize_row(e.from, in + r * in_row, row.data(), cols);
          const float* w =
              importance[i] != nullptr ? importance[i] + (r / rows_per_expert) * cols : nullptr;
          quantize_row_searched(e.to, row.data(), buf.data() + r * out_row, cols, w);
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
