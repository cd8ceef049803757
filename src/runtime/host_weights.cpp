#include "runtime/host_weights.h"

#include "backend/cpu/host_ops.h"
#include "core/error.h"
#include "quant/dequant.h"

namespace ts {

TensorRef HostWeights::need(const std::string& name, const std::vector<int64_t>& dims) const {
  const std::string& path = source_.path();
  const auto t = source_.find(name);
  if (!t) fail(ErrorKind::Model, path + ": missing tensor '" + name + "' (" + tower_ + ")");
  bool ok = t->dims.size() == dims.size();
  std::string want = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    ok = ok && (dims[i] < 0 || static_cast<int64_t>(t->dims[i]) == dims[i]);
    want += (i ? ", " : "") + (dims[i] < 0 ? std::string("any") : std::to_string(dims[i]));
  }
  if (!ok)
    fail(ErrorKind::Model, path + ": tensor '" + name + "' has shape " + t->shape_string() +
                               ", expected " + want + "] (GGML order)");
  if (dims.size() == 1 && t->dtype != DType::F32 && t->dtype != DType::F16 &&
      t->dtype != DType::BF16)
    fail(ErrorKind::Unsupported, path + ": tensor '" + name + "' has type " + dtype_name(t->dtype) +
                                     ", expected f32, f16 or bf16");
  if (dims.size() > 1 && !cpu_.has_weight_kernels(t->dtype))
    fail(ErrorKind::Unsupported, path + ": tensor '" + name + "' has type " + dtype_name(t->dtype) +
                                     ", which the matmul kernels do not support");
  return *t;
}

std::vector<float> HostWeights::floats(const std::string& name,
                                       const std::vector<int64_t>& dims) const {
  const TensorRef t = need(name, dims);
  std::vector<float> out(static_cast<size_t>(t.cols() * t.rows()));
  const uint64_t row = t.nbytes / static_cast<uint64_t>(t.rows());
  for (int64_t r = 0; r < t.rows(); ++r)
    dequantize_row(t.dtype, t.data() + static_cast<uint64_t>(r) * row, out.data() + r * t.cols(),
                   t.cols());
  return out;
}

HostWeights::Linear HostWeights::linear(const std::string& w, const std::string& b, int64_t in,
                                        int64_t out) const {
  const TensorRef t = need(w, {in, out});
  Linear l;
  l.w = cpu_.upload_weight(t.dtype, out, in, t.nbytes / static_cast<uint64_t>(out), t.data());
  l.b = floats(b, {out});
  return l;
}

HostWeights::Linear HostWeights::linear(const std::string& w, int64_t in, int64_t out) const {
  return std::move(linear_parts(w, in, {out}).front());
}

std::vector<HostWeights::Linear> HostWeights::linear_parts(const std::string& w, int64_t in,
                                                           const std::vector<int64_t>& outs) const {
  int64_t rows = 0;
  for (const int64_t n : outs) rows += n;
  if (rows <= 0) fail(ErrorKind::Model, source_.path() + ": tensor '" + w + "' would have no rows");
  const TensorRef t = need(w, {in, rows});
  const uint64_t stride = t.nbytes / static_cast<uint64_t>(rows);
  std::vector<Linear> parts;
  int64_t row0 = 0;
  for (const int64_t n : outs) {
    parts.push_back({cpu_.upload_weight(t.dtype, n, in, stride,
                                        t.data() + static_cast<uint64_t>(row0) * stride),
                     {}});
    row0 += n;
  }
  return parts;
}

HostWeights::Norm HostWeights::norm(const std::string& w, const std::string& b, int64_t n) const {
  return {floats(w, {n}), floats(b, {n})};
}

void HostWeights::apply(const Linear& l, const float* x, int64_t rows, float* y) const {
  apply_linear(cpu_, l, x, rows, y);
}

void apply_linear(Backend& cpu, const HostWeights::Linear& l, const float* x, int64_t rows,
                  float* y) {
  cpu.matmul(l.w, x, rows, y);
  if (!l.b.empty()) cpu.add_bias(y, l.b.data(), rows, l.w.rows);
}

void HostWeights::block_tail(ThreadPool& pool, const Linear& out, const float* att, const Norm& ln,
                             const Linear& fc1, const Linear& fc2, float eps, bool gelu_tanh,
                             int64_t rows, float* x, float* h, float* ff) const {
  const int64_t width = out.w.rows;
  apply(out, att, rows, h);
  cpu_.add(x, h, rows * width);
  layer_norm(pool, x, ln.w.data(), ln.b.data(), rows, width, eps, h);
  apply(fc1, h, rows, ff);
  gelu(pool, ff, rows * fc1.w.rows, gelu_tanh);
  apply(fc2, ff, rows, h);
  cpu_.add(x, h, rows * width);
}

}  // namespace ts
