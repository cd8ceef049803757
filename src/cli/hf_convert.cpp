#include "cli/hf_convert.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/checked.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/convert_mmproj.h"
#include "model/convert_model.h"
#include "model/model_source.h"
#include "quant/quantize.h"
#include "text/convert_vocab.h"

namespace ts::cli {
namespace {

constexpr uint64_t kAlignment = 32;  // the converter's, written without a general.alignment key

void write_all(int fd, uint64_t pos, const void* data, size_t n, const std::string& what) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(pos));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(ErrorKind::Runtime, what + ": write failed: " + std::strerror(errno));
    p += w, pos += static_cast<uint64_t>(w), n -= static_cast<size_t>(w);
  }
}

// The type a tensor is written in: the converter's rules (ConvertTensor::keep_f32; a q8_0 row
// that is not whole blocks falls back to f16).
DType tensor_dtype(const ConvertTensor& t, DType type) {
  if (t.raw_bytes) return t.raw_dtype;
  if (t.f16_always) return DType::F16;
  if (t.f16_in_f16_file) return type == DType::F16 ? DType::F16 : DType::F32;
  if (t.keep_f32) return DType::F32;
  if (type == DType::Q8_0 && t.dims[0] % dtype_info(DType::Q8_0).block_elems != 0)
    return DType::F16;
  return type;
}

ConvertSummary write_model(const ConvertedModel& m, const GgufKeyValues& vocab, int fd,
                           const std::string& what, const ConvertType& type,
                           const std::function<void(uint64_t, uint64_t)>& progress) {
  GgufKvList kv = m.kv;
  const bool is_float =
      type.dtype == DType::F32 || type.dtype == DType::F16 || type.dtype == DType::BF16;
  const int64_t file_type = is_float && m.float_file_type >= 0 ? m.float_file_type : type.file_type;
  kv.set("general.file_type", gguf_int(GgufType::U32, file_type));
  GgufWriter w;
  for (const auto& [k, v] : kv.items()) w.add_kv(k, v);
  for (const auto& [k, v] : vocab) w.add_kv(k, v);
  std::vector<uint64_t> offsets;
  std::vector<DType> types;
  uint64_t data = 0, total = 0;
  for (const ConvertTensor& t : m.tensors) {
    const DType d = tensor_dtype(t, type.dtype);
    const uint64_t rows = t.elements() / t.dims[0];
    const uint64_t nbytes = checked_mul(row_bytes(d, t.dims[0], t.name), rows, t.name);
    w.add_raw_tensor_info(t.name, static_cast<uint32_t>(d), t.dims, data);
    offsets.push_back(data);
    types.push_back(d);
    data = (data + nbytes + kAlignment - 1) / kAlignment * kAlignment;
    total += t.elements();
  }
  const std::vector<uint8_t> header = w.bytes();
  write_all(fd, 0, header.data(), header.size(), what);
  uint64_t done = 0;
  std::vector<float> values;
  std::vector<uint8_t> out;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const ConvertTensor& t = m.tensors[i];
    if (t.raw_bytes) {
      out.assign(row_bytes(types[i], t.dims[0], t.name) * (t.elements() / t.dims[0]), 0);
      t.raw_bytes(out.data());
      write_all(fd, header.size() + offsets[i], out.data(), out.size(), what);
      done += t.elements();
      if (progress) progress(done, total);
      continue;
    }
    values.assign(t.elements(), 0.0f);
    t.values(values.data());
    const auto cols = static_cast<int64_t>(t.dims[0]);
    const int64_t rows = static_cast<int64_t>(t.elements()) / cols;
    const size_t row = row_bytes(types[i], t.dims[0], t.name);
    out.assign(row * static_cast<size_t>(rows), 0);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row_weights(types[i], values.data() + r * cols, out.data() + r * row, cols);
    write_all(fd, header.size() + offsets[i], out.data(), out.size(), what);
    done += t.elements();
    if (progress) progress(done, total);
  }
  const uint64_t end = header.size() + data;
  if (::ftruncate(fd, static_cast<off_t>(end)) != 0)
    fail(ErrorKind::Runtime, what + ": cannot size the file: " + std::strerror(errno));
  return {static_cast<int64_t>(m.tensors.size()), end, {}};
}

struct Converted {
  ConvertedModel model;
  GgufKeyValues vocab;
  std::string warning;
};

Converted convert(const ModelSource& src) {
  Converted c{convert_hf_model(src), {}, {}};
  c.vocab = convert_vocab(src.path(), c.model.vocab, &c.warning);
  return c;
}

Converted convert_mmproj(const ModelSource& src) {
  return {convert_hf_mmproj(src), {}, {}};
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

const std::vector<ConvertType>& convert_types() {
  // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_BF16 32.
  static const std::vector<ConvertType> types = {{"f32", DType::F32, 0},
                                                 {"f16", DType::F16, 1},
                                                 {"bf16", DType::BF16, 32},
                                                 {"q8_0", DType::Q8_0, 7}};
  return types;
}

std::string convert_type_names() {
  std::string s;
  for (const ConvertType& t : convert_types()) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

ConvertSummary write_converted(const std::string& hf_dir, const std::string& out,
                               const ConvertType& type, bool mmproj,
                               const std::function<void(uint64_t, uint64_t)>& progress) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(hf_dir, out, ec) ||
      fs::weakly_canonical(out, ec).parent_path() == fs::weakly_canonical(hf_dir, ec))
    fail(ErrorKind::Usage, "convert: the output " + out + " would be written into the input");
  const auto src = ModelSource::open(hf_dir);
  if (src->hf() == nullptr)
    fail(ErrorKind::Usage, "convert: " + hf_dir + " is not a Hugging Face directory");
  const Converted c = mmproj ? convert_mmproj(*src) : convert(*src);
  const Fd fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    fail(ErrorKind::Usage, out + ": cannot open for writing: " + std::strerror(errno));
  try {
    ConvertSummary s = write_model(c.model, c.vocab, fd.get(), out, type, progress);
    s.warning = c.warning;
    return s;
  } catch (...) {
    fs::remove(out, ec);
    throw;
  }
}

std::unique_ptr<GgufFile> open_converted(const std::string& hf_dir) {
  const auto src = ModelSource::open(hf_dir);
  const Converted c = convert(*src);
  // The checkpoint's own float type, so that nothing is rounded before quantize sees it.
  DType dtype = DType::F32;
  for (const TensorRef& t : src->all_tensors())
    if (t.dims.size() >= 2) {
      dtype = t.dtype;
      break;
    }
  ConvertType type = convert_types()[0];
  for (const ConvertType& t : convert_types())
    if (t.dtype == dtype) type = t;
  const Fd fd(::memfd_create("turbospark-convert", MFD_CLOEXEC));
  if (fd.get() < 0)
    fail(ErrorKind::Runtime, "convert: memfd_create failed: " + std::string(std::strerror(errno)));
  if (!c.warning.empty()) std::fprintf(stderr, "warning: %s\n", c.warning.c_str());
  write_model(c.model, c.vocab, fd.get(), hf_dir, type, nullptr);
  return GgufFile::open_single("/proc/self/fd/" + std::to_string(fd.get()));
}

}  // namespace ts::cli
