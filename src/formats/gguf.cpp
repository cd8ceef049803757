#include "formats/gguf.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/checked.h"
#include "core/error.h"

namespace ts {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;        // nested arrays deeper than this are refused, not recursed
// Metadata and tensor infos must fit in the first 256 MiB (real headers, 262k-token vocabularies
// included, are under 20 MiB). Parsed metadata takes up to 8x its file bytes (a u8 array element
// becomes an int64), so without this bound a corrupt count in a 100 GB file would be read as
// metadata until memory runs out instead of being refused.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 28;
// Vectors are reserved up to this many entries ahead of reading them, never more: a count is only
// a claim until the bytes behind it have been read.
constexpr uint64_t kMaxReserve = uint64_t{1} << 16;

uint64_t reserve_hint(uint64_t n) {
  return std::min(n, kMaxReserve);
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

uint64_t GgufArray::size() const {
  return ints.size() + floats.size() + strings.size() + nested.size();
}

uint64_t GgufTensor::elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n = checked_mul(n, d, name);
  return n;
}

// Reads the header with a cursor that refuses to step past the end of the file.
class GgufParser {
 public:
  GgufParser(GgufFile& out)
      : f_(out),
        data_(out.files_[0]->data()),
        size_(out.files_[0]->size()),
        header_end_(std::min(size_, kMaxHeaderBytes)) {}

  void parse() {
    if (size_ < 24)
      error("file is " + std::to_string(size_) + " bytes, too short for a GGUF header");
    const uint32_t magic = u32("magic");
    if (magic != kMagic) error("not a GGUF file (bad magic)");
    f_.version_ = u32("version");
    if (f_.version_ == 1) error("GGUF version 1 is not supported (versions 2 and 3 are)");
    if (f_.version_ != 2 && f_.version_ != 3) {
      error("unsupported GGUF version " + std::to_string(f_.version_) +
            (f_.version_ > 0xFFFF ? " (big-endian GGUF files are not supported)" : ""));
    }
    const uint64_t n_tensors = u64("tensor count");
    const uint64_t n_kv = u64("metadata count");
    // Each key/value needs at least 8 (key length) + 4 (type) + 1 byte, each tensor info at
    // least 8 + 4 + 4 (dims) + 4 + 8: a count the remaining bytes cannot hold is refused before
    // any allocation sized by it.
    if (n_kv > remaining() / 13)
      error("metadata count " + std::to_string(n_kv) + " exceeds the file");
    if (n_tensors > remaining() / 28)
      error("tensor count " + std::to_string(n_tensors) + " exceeds the file");

    f_.kv_.reserve(reserve_hint(n_kv));
    for (uint64_t k = 0; k < n_kv; ++k) {
      std::string key = str("metadata key #" + std::to_string(k));
      const auto type = static_cast<GgufType>(u32("type of " + key));
      GgufValue value = read_value(type, key, 0);
      if (!f_.kv_index_.emplace(key, f_.kv_.size()).second)
        error("duplicate metadata key '" + key + "'");
      f_.kv_.emplace_back(std::move(key), std::move(value));
    }

    if (const GgufValue* a = f_.find("general.alignment")) {
      if (a->type != GgufType::U32 && a->type != GgufType::U64 && a->type != GgufType::I32)
        error("general.alignment has type " + std::string(gguf_type_name(a->type)) +
              ", expected u32");
      if (a->i <= 0 || a->i > (1 << 24) || (a->i & (a->i - 1)) != 0)
        error("general.alignment = " + std::to_string(a->i) + " is not a power of two in 1.." +
              std::to_string(1 << 24));
      f_.alignment_ = static_cast<uint64_t>(a->i);
    }

    f_.tensors_.reserve(reserve_hint(n_tensors));
    for (uint64_t t = 0; t < n_tensors; ++t) read_tensor_info(t);

    f_.data_offset_ = align_up(pos_, f_.alignment_, "data offset");
    if (f_.data_offset_ > size_ && n_tensors > 0)
      error("tensor data section starts past the end of the file");
    check_tensor_ranges();
  }

 private:
  [[noreturn]] void error(const std::string& msg) const {
    fail(ErrorKind::Model, f_.path() + ": " + msg);
  }
  uint64_t remaining() const { return header_end_ - pos_; }
  void need(uint64_t n, const std::string& what) const {
    if (n > remaining() && header_end_ < size_)
      error(what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
            ": the header would exceed the " + std::to_string(kMaxHeaderBytes) + "-byte limit");
    if (n > remaining())
      error("truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
            std::to_string(pos_) + ", file has " + std::to_string(remaining()) + " left");
  }
  template <typename T>
  T scalar(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t u32(const std::string& what) { return scalar<uint32_t>(what); }
  uint64_t u64(const std::string& what) { return scalar<uint64_t>(what); }
  std::string str(const std::string& what) {
    const uint64_t n = u64(what + " length");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

  static uint64_t min_size(GgufType t) {
    switch (t) {
      case GgufType::U8:
      case GgufType::I8:
      case GgufType::Bool:
        return 1;
      case GgufType::U16:
      case GgufType::I16:
        return 2;
      case GgufType::U32:
      case GgufType::I32:
      case GgufType::F32:
        return 4;
      case GgufType::U64:
      case GgufType::I64:
      case GgufType::F64:
      case GgufType::String:
        return 8;
      case GgufType::Array:
        return 12;
    }
    return 1;
  }

  int64_t read_int(GgufType t, const std::string& key) {
    switch (t) {
      case GgufType::U8:
        return scalar<uint8_t>(key);
      case GgufType::I8:
        return scalar<int8_t>(key);
      case GgufType::U16:
        return scalar<uint16_t>(key);
      case GgufType::I16:
        return scalar<int16_t>(key);
      case GgufType::U32:
        return scalar<uint32_t>(key);
      case GgufType::I32:
        return scalar<int32_t>(key);
      case GgufType::I64:
        return scalar<int64_t>(key);
      case GgufType::U64: {
        const uint64_t v = scalar<uint64_t>(key);
        if (v > static_cast<uint64_t>(INT64_MAX))
          error(key + ": u64 value " + std::to_string(v) + " is out of range");
        return static_cast<int64_t>(v);
      }
      case GgufType::Bool: {
        const uint8_t b = scalar<uint8_t>(key);
        if (b > 1) error(key + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
        return b;
      }
      default:
        error(key + ": not an integer type");
    }
  }

  static bool is_int(GgufType t) {
    return t == GgufType::U8 || t == GgufType::I8 || t == GgufType::U16 || t == GgufType::I16 ||
           t == GgufType::U32 || t == GgufType::I32 || t == GgufType::U64 || t == GgufType::I64 ||
           t == GgufType::Bool;
  }

  GgufValue read_value(GgufType type, const std::string& key, int depth) {
    GgufValue v;
    v.type = type;
    if (is_int(type)) {
      v.i = read_int(type, key);
    } else if (type == GgufType::F32) {
      v.f = scalar<float>(key);
    } else if (type == GgufType::F64) {
      v.f = scalar<double>(key);
    } else if (type == GgufType::String) {
      v.s = str(key);
    } else if (type == GgufType::Array) {
      v.arr = read_array(key, depth);
    } else {
      error(key + ": unknown metadata value type " + std::to_string(static_cast<uint32_t>(type)));
    }
    return v;
  }

  std::shared_ptr<GgufArray> read_array(const std::string& key, int depth) {
    if (depth >= kMaxArrayDepth)
      error(key + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth));
    auto a = std::make_shared<GgufArray>();
    const uint32_t raw_elem = u32(key + " array type");
    if (raw_elem > static_cast<uint32_t>(GgufType::F64))
      error(key + ": unknown array element type " + std::to_string(raw_elem));
    a->elem = static_cast<GgufType>(raw_elem);
    const uint64_t n = u64(key + " array length");
    if (n > remaining() / min_size(a->elem))
      error(key + ": array length " + std::to_string(n) + " exceeds the file");
    if (is_int(a->elem)) {
      a->ints.reserve(reserve_hint(n));
      for (uint64_t k = 0; k < n; ++k) a->ints.push_back(read_int(a->elem, key));
    } else if (a->elem == GgufType::F32 || a->elem == GgufType::F64) {
      a->floats.reserve(reserve_hint(n));
      for (uint64_t k = 0; k < n; ++k)
        a->floats.push_back(a->elem == GgufType::F32 ? scalar<float>(key) : scalar<double>(key));
    } else if (a->elem == GgufType::String) {
      a->strings.reserve(reserve_hint(n));
      for (uint64_t k = 0; k < n; ++k) a->strings.push_back(str(key));
    } else {
      a->nested.reserve(reserve_hint(n));
      for (uint64_t k = 0; k < n; ++k)
        a->nested.push_back(read_value(GgufType::Array, key, depth + 1));
    }
    return a;
  }

  void read_tensor_info(uint64_t index) {
    GgufTensor t;
    t.name = str("name of tensor #" + std::to_string(index));
    const std::string& n = t.name;
    const uint32_t n_dims = u32(n + " dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      error("tensor '" + n + "': " + std::to_string(n_dims) + " dimensions (1.." +
            std::to_string(kMaxDims) + " allowed)");
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = u64(n + " dimension");
      if (dim == 0 || dim > (uint64_t{1} << 40))
        error("tensor '" + n + "': dimension " + std::to_string(d) + " = " + std::to_string(dim) +
              " is out of range");
      t.dims.push_back(dim);
    }
    const uint32_t raw_type = u32(n + " type");
    const auto info = dtype_info(raw_type);
    if (!info) error("tensor '" + n + "': unknown ggml type id " + std::to_string(raw_type));
    t.dtype = static_cast<DType>(raw_type);
    t.offset = u64(n + " offset");  // relative to the data section until check_tensor_ranges
    uint64_t rows = 1;
    for (size_t d = 1; d < t.dims.size(); ++d)
      rows = checked_mul(rows, t.dims[d], f_.path() + ": tensor '" + n + "'");
    t.nbytes = checked_mul(row_bytes(t.dtype, t.dims[0], f_.path() + ": tensor '" + n + "'"), rows,
                           f_.path() + ": tensor '" + n + "'");
    if (!f_.tensor_index_.emplace(t.name, f_.tensors_.size()).second)
      error("duplicate tensor name '" + n + "'");
    f_.tensors_.push_back(std::move(t));
  }

  void check_tensor_ranges() {
    const uint64_t data_size = f_.data_offset_ <= size_ ? size_ - f_.data_offset_ : 0;
    std::vector<const GgufTensor*> by_offset;
    for (GgufTensor& t : f_.tensors_) {
      if (t.offset % f_.alignment_ != 0)
        error("tensor '" + t.name + "': offset " + std::to_string(t.offset) +
              " is not aligned to " + std::to_string(f_.alignment_));
      if (t.offset > data_size || t.nbytes > data_size - t.offset)
        error("tensor '" + t.name + "': bytes [" + std::to_string(t.offset) + ", +" +
              std::to_string(t.nbytes) + ") run past the end of the file (data section is " +
              std::to_string(data_size) + " bytes)");
      t.offset += f_.data_offset_;
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (size_t k = 1; k < by_offset.size(); ++k) {
      const GgufTensor& prev = *by_offset[k - 1];
      if (by_offset[k]->offset < prev.offset + prev.nbytes)
        error("tensors '" + prev.name + "' and '" + by_offset[k]->name + "' overlap");
    }
  }

  GgufFile& f_;
  const uint8_t* data_;
  uint64_t size_;
  // min(file size, kMaxHeaderBytes): where metadata and tensor infos must end.
  uint64_t header_end_;
  uint64_t pos_ = 0;
};

std::unique_ptr<GgufFile> GgufFile::open_single(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->files_.push_back(std::make_unique<MappedFile>(path));
  GgufParser(*f).parse();
  return f;
}

namespace {

// llama.cpp's split metadata (LLM_KV_SPLIT_*), written in every part by gguf-split and by gguf-py's
// GGUFWriter(split_max_tensors=...).
constexpr std::string_view kSplitNo = "split.no";
constexpr std::string_view kSplitCount = "split.count";
constexpr std::string_view kSplitTensors = "split.tensors.count";
// split.count is a u16 in llama.cpp's files.
constexpr int64_t kMaxSplitParts = 65535;

// The name llama.cpp gives part `no` (0-based) of `count`, after the prefix (llama_split_path).
std::string split_suffix(int64_t no, int64_t count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "-%05lld-of-%05lld.gguf", static_cast<long long>(no + 1),
                static_cast<long long>(count));
  return buf;
}

[[noreturn]] void split_error(const std::string& path, const std::string& msg) {
  fail(ErrorKind::Model, path + ": " + msg);
}

std::string key_eq(std::string_view key, int64_t v) {
  return std::string(key) + " = " + std::to_string(v);
}

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> opened = open_single(path);
  const std::optional<int64_t> count = opened->get_int(kSplitCount);
  const std::optional<int64_t> no = opened->get_int(kSplitNo);
  if (!count && !no) return opened;
  if (!count) split_error(path, key_eq(kSplitNo, *no) + " but split.count is missing");
  if (*count < 1 || *count > kMaxSplitParts)
    split_error(path, key_eq(kSplitCount, *count) + " is out of range (1.." +
                          std::to_string(kMaxSplitParts) + ")");
  if (!no) split_error(path, key_eq(kSplitCount, *count) + " but split.no is missing");
  if (*no < 0 || *no >= *count)
    split_error(path,
                key_eq(kSplitNo, *no) + " is out of range for " + key_eq(kSplitCount, *count));
  if (*count == 1) return opened;
  const std::optional<int64_t> n_tensors = opened->get_int(kSplitTensors);
  if (!n_tensors)
    split_error(path, key_eq(kSplitCount, *count) + " but split.tensors.count is missing");
  if (*n_tensors < 0) split_error(path, key_eq(kSplitTensors, *n_tensors) + " is negative");

  // The other parts are found by name, as llama.cpp finds them: the opened file's name must be the
  // one gguf-split gave it.
  const std::string suffix = split_suffix(*no, *count);
  if (path.size() <= suffix.size() ||
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
    split_error(path, "part " + std::to_string(*no + 1) + " of a split model of " +
                          std::to_string(*count) + " parts must be named PREFIX" + suffix +
                          " (the other parts are found by that name)");
  const std::string prefix = path.substr(0, path.size() - suffix.size());

  std::vector<std::unique_ptr<GgufFile>> parts(static_cast<size_t>(*count));
  parts[static_cast<size_t>(*no)] = std::move(opened);
  for (int64_t k = 0; k < *count; ++k) {
    if (k == *no) continue;
    const std::string part_path = prefix + split_suffix(k, *count);
    struct stat st {};
    if (::stat(part_path.c_str(), &st) != 0)
      split_error(path, "part " + std::to_string(k + 1) + " of " + std::to_string(*count) +
                            " of the split model is missing: " + part_path);
    std::unique_ptr<GgufFile> part = open_single(part_path);
    const auto expect = [&](std::string_view key, int64_t want) {
      const std::optional<int64_t> v = part->get_int(key);
      if (!v)
        split_error(part_path, std::string(key) + " is missing (the part after " + path + ")");
      if (*v != want)
        split_error(part_path, key_eq(key, *v) + ", but " + path + " says " + std::to_string(want));
    };
    expect(kSplitCount, *count);
    expect(kSplitNo, k);
    expect(kSplitTensors, *n_tensors);
    parts[static_cast<size_t>(k)] = std::move(part);
  }

  // The first part keeps the metadata (the others hold only split.*, as gguf-split writes them)
  // and takes the tensors and mappings of the rest.
  std::unique_ptr<GgufFile> joined = std::move(parts[0]);
  for (size_t k = 1; k < parts.size(); ++k) {
    GgufFile& part = *parts[k];
    for (GgufTensor& t : part.tensors_) {
      const auto [it, fresh] = joined->tensor_index_.emplace(t.name, joined->tensors_.size());
      if (!fresh)
        split_error(part.path(), "tensor '" + t.name + "' is also in part " +
                                     std::to_string(joined->tensors_[it->second].part + 1) +
                                     " of the split model");
      t.part = static_cast<uint32_t>(k);
      joined->tensors_.push_back(std::move(t));
    }
    joined->files_.push_back(std::move(part.files_[0]));
  }
  if (joined->tensors_.size() != static_cast<uint64_t>(*n_tensors))
    split_error(joined->path(), key_eq(kSplitTensors, *n_tensors) + ", but its " +
                                    std::to_string(*count) + " parts hold " +
                                    std::to_string(joined->tensors_.size()) + " tensors");
  return joined;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type == GgufType::F32 || v->type == GgufType::F64 || v->type == GgufType::String ||
      v->type == GgufType::Array)
    fail(ErrorKind::Model, path() + ": metadata '" + std::string(key) + "' has type " +
                               gguf_type_name(v->type) + ", expected an integer");
  return v->i;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type == GgufType::F32 || v->type == GgufType::F64) return v->f;
  if (v->type == GgufType::String || v->type == GgufType::Array || v->type == GgufType::Bool)
    fail(ErrorKind::Model, path() + ": metadata '" + std::string(key) + "' has type " +
                               gguf_type_name(v->type) + ", expected a number");
  return static_cast<double>(v->i);
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::Bool)
    fail(ErrorKind::Model, path() + ": metadata '" + std::string(key) + "' has type " +
                               gguf_type_name(v->type) + ", expected bool");
  return v->i != 0;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::String)
    fail(ErrorKind::Model, path() + ": metadata '" + std::string(key) + "' has type " +
                               gguf_type_name(v->type) + ", expected string");
  return v->s;
}

const GgufArray* GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return nullptr;
  if (v->type != GgufType::Array)
    fail(ErrorKind::Model, path() + ": metadata '" + std::string(key) + "' has type " +
                               gguf_type_name(v->type) + ", expected array");
  return v->arr.get();
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace ts
