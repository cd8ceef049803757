#include "formats/gguf_writer.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <utility>

#include "core/checked.h"
#include "core/error.h"

namespace ts {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" as a little-endian u32

class Out {
 public:
  template <typename T>
  void put(T v) {
    const size_t at = buf.size();
    buf.resize(at + sizeof(T));
    std::memcpy(buf.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    buf.insert(buf.end(), s.begin(), s.end());
  }
  void put_int(GgufType t, int64_t v) {
    switch (t) {
      case GgufType::U8:
      case GgufType::Bool:
        return put(static_cast<uint8_t>(v));
      case GgufType::I8:
        return put(static_cast<int8_t>(v));
      case GgufType::U16:
        return put(static_cast<uint16_t>(v));
      case GgufType::I16:
        return put(static_cast<int16_t>(v));
      case GgufType::U32:
        return put(static_cast<uint32_t>(v));
      case GgufType::I32:
        return put(static_cast<int32_t>(v));
      case GgufType::U64:
        return put(static_cast<uint64_t>(v));
      case GgufType::I64:
        return put(v);
      default:
        fail(ErrorKind::Usage,
             std::string("gguf writer: ") + gguf_type_name(t) + " is not an integer type");
    }
  }
  void put_float(GgufType t, double v) {
    if (t == GgufType::F32)
      put(static_cast<float>(v));
    else
      put(v);
  }
  // The payload of a value whose type tag was already written. An unknown type has no payload:
  // the tag alone is what a malformed-file test needs.
  void put_payload(const GgufValue& v) {
    switch (v.type) {
      case GgufType::F32:
      case GgufType::F64:
        return put_float(v.type, v.f);
      case GgufType::String:
        return put_string(v.s);
      case GgufType::Array:
        if (!v.arr) fail(ErrorKind::Usage, "gguf writer: array value without elements");
        return put_array(*v.arr);
      default:
        if (static_cast<uint32_t>(v.type) <= static_cast<uint32_t>(GgufType::F64))
          put_int(v.type, v.i);
    }
  }
  void put_array(const GgufArray& a) {
    put(static_cast<uint32_t>(a.elem));
    switch (a.elem) {
      case GgufType::F32:
      case GgufType::F64:
        put<uint64_t>(a.floats.size());
        for (double f : a.floats) put_float(a.elem, f);
        return;
      case GgufType::String:
        put<uint64_t>(a.strings.size());
        for (const std::string& s : a.strings) put_string(s);
        return;
      case GgufType::Array:
        put<uint64_t>(a.nested.size());
        for (const GgufValue& n : a.nested) put_payload(n);
        return;
      default:
        put<uint64_t>(a.ints.size());
        for (int64_t i : a.ints) put_int(a.elem, i);
    }
  }
  void pad_to(uint64_t alignment) { buf.resize(align_up(buf.size(), alignment, "gguf writer")); }

  std::vector<uint8_t> buf;
};

}  // namespace

GgufValue gguf_int(GgufType type, int64_t v) {
  GgufValue r;
  r.type = type;
  r.i = v;
  return r;
}

GgufValue gguf_float(GgufType type, double v) {
  GgufValue r;
  r.type = type;
  r.f = v;
  return r;
}

GgufValue gguf_string(std::string s) {
  GgufValue r;
  r.type = GgufType::String;
  r.s = std::move(s);
  return r;
}

GgufValue gguf_array(GgufArray a) {
  GgufValue r;
  r.type = GgufType::Array;
  r.arr = std::make_shared<GgufArray>(std::move(a));
  return r;
}

void GgufWriter::add_kv(std::string key, GgufValue value) {
  kv_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::set_alignment(uint32_t alignment) {
  if (alignment == 0 || !tensors_.empty())
    fail(ErrorKind::Usage, "gguf writer: alignment must be positive and set before any tensor");
  alignment_ = alignment;
  add_kv("general.alignment", gguf_int(GgufType::U32, alignment));
}

void GgufWriter::add_tensor(std::string name, DType dtype, std::vector<uint64_t> dims,
                            const void* data, uint64_t nbytes) {
  uint64_t expected =
      dims.empty() ? 0 : row_bytes(dtype, dims[0], "gguf writer: tensor '" + name + "'");
  for (size_t d = 1; d < dims.size(); ++d)
    expected = checked_mul(expected, dims[d], "gguf writer: tensor '" + name + "'");
  if (dims.empty() || expected != nbytes)
    fail(ErrorKind::Usage, "gguf writer: tensor '" + name + "' is given " + std::to_string(nbytes) +
                               " bytes, its dims and dtype need " + std::to_string(expected));
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({std::move(name), static_cast<uint32_t>(dtype), std::move(dims), data_size_,
                      std::vector<uint8_t>(p, p + nbytes)});
  data_size_ = align_up(data_size_ + nbytes, alignment_, "gguf writer");
}

void GgufWriter::add_raw_tensor_info(std::string name, uint32_t ggml_type,
                                     std::vector<uint64_t> dims, uint64_t offset) {
  tensors_.push_back({std::move(name), ggml_type, std::move(dims), offset, {}});
}

std::vector<uint8_t> GgufWriter::bytes(GgufLayout* layout) const {
  GgufLayout l;
  Out out;
  out.put(kMagic);
  out.put(version_);
  out.put<uint64_t>(tensors_.size());
  out.put<uint64_t>(kv_.size());
  for (const auto& [key, value] : kv_) {
    l.kv_offsets.push_back(out.buf.size());
    out.put_string(key);
    out.put(static_cast<uint32_t>(value.type));
    out.put_payload(value);
  }
  l.tensor_infos_begin = out.buf.size();
  for (const Tensor& t : tensors_) {
    l.tensor_info_offsets.push_back(out.buf.size());
    out.put_string(t.name);
    out.put(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) out.put(d);
    out.put(t.type);
    out.put(t.offset);
  }
  out.pad_to(alignment_);
  l.data_begin = out.buf.size();
  out.buf.resize(l.data_begin + data_size_);
  for (const Tensor& t : tensors_)
    if (!t.data.empty())
      std::memcpy(out.buf.data() + l.data_begin + t.offset, t.data.data(), t.data.size());
  l.end = out.buf.size();
  if (layout != nullptr) *layout = std::move(l);
  return std::move(out.buf);
}

void GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> b = bytes();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  f.close();
  if (!f) fail(ErrorKind::Runtime, path + ": cannot write the GGUF file");
}

}  // namespace ts
