#include "formats/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/checked.h"
#include "core/error.h"
#include "formats/fp8_blocks.h"

namespace ts {
namespace {

using nlohmann::json;

// The reference implementation refuses larger headers too; it also bounds the memory a hostile
// header can make the JSON parser allocate.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// config.json and the shard index are small (a 100k-tensor index is ~10 MB).
constexpr uint64_t kMaxSideFileBytes = 100'000'000;

// Safetensors dtype names this build reads; every other name is refused.
struct StDType {
  const char* name;
  DType dtype;
};
constexpr StDType kStDTypes[] = {
    {"F64", DType::F64}, {"F32", DType::F32},   {"F16", DType::F16},         {"BF16", DType::BF16},
    {"I64", DType::I64}, {"I32", DType::I32},   {"I16", DType::I16},         {"I8", DType::I8},
    {"U8", DType::U8},   {"BOOL", DType::Bool}, {"F8_E4M3", DType::F8_E4M3},
};
// Valid safetensors dtypes this build cannot compute with: refused as unsupported, not malformed.
constexpr const char* kKnownUnsupported[] = {"F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",
                                             "U16",     "U32",     "U64",     "C64"};

// Deeper JSON is refused while parsing: every level of a 100 MB "[[[[..." costs the DOM tens of
// bytes per input byte, gigabytes in all. Headers nest 3 levels, configs about 5.
constexpr int kMaxJsonDepth = 64;

// Parses JSON text, refusing duplicate keys in any object: nlohmann keeps the last of two equal
// keys, which would let a second "weight" entry silently replace the first.
json parse_json_unique_keys(std::string_view text, const std::string& what) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      fail(ErrorKind::Model,
           what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    switch (event) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        open_objects.pop_back();
        break;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!open_objects.back().insert(key).second && duplicate.empty()) duplicate = key;
        break;
      }
      default:
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    fail(ErrorKind::Model, what + " is not valid JSON: " + e.what());
  }
  if (!duplicate.empty()) fail(ErrorKind::Model, what + ": duplicate key '" + duplicate + "'");
  return j;
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

json read_json_file(const std::string& path) {
  MappedFile f(path);
  if (f.size() > kMaxSideFileBytes)
    fail(ErrorKind::Model, path + ": " + std::to_string(f.size()) + " bytes, larger than the " +
                               std::to_string(kMaxSideFileBytes) + "-byte limit for a JSON file");
  const auto* text = reinterpret_cast<const char*>(f.data());
  return parse_json_unique_keys(std::string_view(text, f.size()), path);
}

}  // namespace

class SafetensorsParser {
 public:
  explicit SafetensorsParser(SafetensorsFile& out) : f_(out) {}

  void parse() {
    const uint64_t size = f_.file_->size();
    if (size < 8)
      error("file is " + std::to_string(size) + " bytes, too short for a safetensors header");
    uint64_t header_len;
    std::memcpy(&header_len, f_.file_->data(), 8);
    if (header_len > kMaxHeaderBytes)
      error("header length " + std::to_string(header_len) + " exceeds the " +
            std::to_string(kMaxHeaderBytes) + "-byte limit");
    if (header_len > size - 8)
      error("header length " + std::to_string(header_len) + " runs past the end of the file (" +
            std::to_string(size) + " bytes)");
    data_begin_ = 8 + header_len;
    data_size_ = size - data_begin_;

    const auto* text = reinterpret_cast<const char*>(f_.file_->data() + 8);
    const json header =
        parse_json_unique_keys(std::string_view(text, header_len), f_.path() + ": header");
    if (!header.is_object()) error("header is not a JSON object");
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__")
        read_metadata(entry);
      else
        read_tensor(name, entry);
    }
    check_overlaps();
    std::stable_sort(  // ties (empty tensors) stay in name order
        f_.tensors_.begin(), f_.tensors_.end(),
        [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.offset < b.offset; });
    for (size_t k = 0; k < f_.tensors_.size(); ++k) f_.index_.emplace(f_.tensors_[k].name, k);
  }

 private:
  [[noreturn]] void error(const std::string& msg) const {
    fail(ErrorKind::Model, f_.path() + ": " + msg);
  }

  void read_metadata(const json& entry) {
    if (!entry.is_object()) error("__metadata__ is not a JSON object");
    for (const auto& [key, value] : entry.items()) {
      if (!value.is_string()) error("__metadata__ '" + key + "' is not a string");
      f_.metadata_.emplace(key, value.get<std::string>());
    }
  }

  void read_tensor(const std::string& name, const json& entry) {
    const std::string what = "tensor '" + name + "'";
    if (!entry.is_object()) error(what + ": entry is not a JSON object");
    const auto dtype_it = entry.find("dtype");
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string())
      error(what + ": missing or non-string 'dtype'");
    if (shape_it == entry.end() || !shape_it->is_array())
      error(what + ": missing or non-array 'shape'");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
        !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned())
      error(what + ": 'data_offsets' is not a pair of non-negative integers");

    SafetensorsTensor t;
    t.name = name;
    t.dtype = parse_dtype(what, dtype_it->get<std::string>());
    uint64_t elements = 1;
    for (const json& d : *shape_it) {
      if (!d.is_number_unsigned())
        error(what + ": 'shape' holds " + d.dump() + ", not a non-negative integer");
      const uint64_t dim = d.get<uint64_t>();
      elements = checked_mul(elements, dim, f_.path() + ": " + what + " shape");
      t.dims.push_back(dim);
    }
    std::reverse(t.dims.begin(), t.dims.end());  // row-major shape -> GGML order
    t.nbytes =
        checked_mul(elements, dtype_info(t.dtype).block_bytes, f_.path() + ": " + what + " shape");

    const uint64_t begin = (*offsets_it)[0].get<uint64_t>();
    const uint64_t end = (*offsets_it)[1].get<uint64_t>();
    if (begin > end)
      error(what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
            ") are reversed");
    if (end > data_size_)
      error(what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
            ") run past the end of the data (" + std::to_string(data_size_) + " bytes)");
    if (end - begin != t.nbytes)
      error(what + ": shape x " + dtype_name(t.dtype) + " is " + std::to_string(t.nbytes) +
            " bytes but data_offsets span " + std::to_string(end - begin));
    t.offset = data_begin_ + begin;
    f_.tensors_.push_back(std::move(t));
  }

  DType parse_dtype(const std::string& what, const std::string& name) const {
    for (const StDType& d : kStDTypes)
      if (name == d.name) return d.dtype;
    for (const char* u : kKnownUnsupported)
      if (name == u)
        fail(ErrorKind::Unsupported,
             f_.path() + ": " + what + " has dtype " + name + ", which is not supported");
    error(what + ": unknown dtype '" + name + "'");
  }

  // Empty tensors occupy no bytes and may share an offset with anything; every other pair of
  // byte ranges must be disjoint (after sorting, checking neighbours is enough).
  void check_overlaps() const {
    std::vector<const SafetensorsTensor*> ranges;
    for (const SafetensorsTensor& t : f_.tensors_)
      if (t.nbytes > 0) ranges.push_back(&t);
    std::sort(ranges.begin(), ranges.end(),
              [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
                return a->offset < b->offset;
              });
    for (size_t k = 1; k < ranges.size(); ++k)
      if (ranges[k]->offset < ranges[k - 1]->offset + ranges[k - 1]->nbytes)
        error("tensors '" + ranges[k - 1]->name + "' and '" + ranges[k]->name + "' overlap");
  }

  SafetensorsFile& f_;
  uint64_t data_begin_ = 0;
  uint64_t data_size_ = 0;
};

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->file_ = std::make_unique<MappedFile>(path);
  SafetensorsParser(*f).parse();
  return f;
}

const SafetensorsTensor* SafetensorsFile::tensor(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

HfDirectory::~HfDirectory() = default;

std::unique_ptr<HfDirectory> HfDirectory::open(const std::string& dir) {
  std::unique_ptr<HfDirectory> d(new HfDirectory());
  d->dir_ = dir;
  while (d->dir_.size() > 1 && d->dir_.back() == '/') d->dir_.pop_back();
  const std::string config_path = d->dir_ + "/config.json";
  if (!is_file(config_path))
    fail(ErrorKind::Model, dir + ": no config.json (not a Hugging Face model directory)");
  d->config_ = std::make_unique<json>(read_json_file(config_path));
  if (!d->config_->is_object()) fail(ErrorKind::Model, config_path + ": not a JSON object");

  const std::string single = d->dir_ + "/model.safetensors";
  const std::string index_path = d->dir_ + "/model.safetensors.index.json";
  if (is_file(single)) {
    d->add_shard(single);
  } else if (is_file(index_path)) {
    d->open_sharded(index_path);
  } else {
    fail(ErrorKind::Model, dir + ": neither model.safetensors nor model.safetensors.index.json");
  }
  d->dequantise_fp8();
  return d;
}

void HfDirectory::dequantise_fp8() {
  std::vector<Fp8Weight> weights;
  for (const auto& [name, found] : index_) {
    if (found.tensor->dtype != DType::F8_E4M3) continue;
    const Found scale = find(name + "_scale_inv");
    weights.push_back({found.tensor, found.file, scale.tensor, scale.file});
  }
  if (weights.empty()) return;
  // DeepSeek's FP8 releases: quantization_config.weight_block_size, [128, 128] when absent.
  int64_t block[2] = {128, 128};
  const std::string key = "quantization_config/weight_block_size";
  const auto q = config_->find("quantization_config");
  if (q != config_->end() && q->is_object() && q->contains("weight_block_size")) {
    const json& b = (*q)["weight_block_size"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_unsigned() ||
        !b[1].is_number_unsigned() || b[0].get<int64_t>() < 1 || b[1].get<int64_t>() < 1)
      fail(ErrorKind::Model, dir_ + "/config.json: " + key + " is not two positive integers");
    block[0] = b[0].get<int64_t>();
    block[1] = b[1].get<int64_t>();
  }
  fp8_ = dequantise_fp8_blocks(weights, block[0], block[1], dir_);
  for (const SafetensorsTensor& t : fp8_->tensors()) index_[t.name] = Found{fp8_.get(), &t};
}

void HfDirectory::add_shard(const std::string& path) {
  shards_.push_back(SafetensorsFile::open(path));
  const SafetensorsFile* shard = shards_.back().get();
  for (const SafetensorsTensor& t : shard->tensors()) {
    const auto [it, added] = index_.emplace(t.name, Found{shard, &t});
    if (!added)
      fail(ErrorKind::Model,
           path + ": tensor '" + t.name + "' is also in " + it->second.file->path());
  }
}

void HfDirectory::open_sharded(const std::string& index_path) {
  const json index = read_json_file(index_path);
  if (!index.is_object()) fail(ErrorKind::Model, index_path + ": not a JSON object");
  const auto map_it = index.find("weight_map");
  if (map_it == index.end() || !map_it->is_object() || map_it->empty())
    fail(ErrorKind::Model, index_path + ": missing or empty 'weight_map' object");

  std::map<std::string, const SafetensorsFile*> opened;  // shard file name -> shard
  for (const auto& [tensor, shard_value] : map_it->items()) {
    if (!shard_value.is_string())
      fail(ErrorKind::Model,
           index_path + ": weight_map entry for '" + tensor + "' is not a string");
    const std::string& shard_name = shard_value.get_ref<const std::string&>();
    // Shards sit beside the index; a path would let an index reach any file on the machine.
    if (shard_name.empty() || shard_name.find('/') != std::string::npos || shard_name == "." ||
        shard_name == "..")
      fail(ErrorKind::Model, index_path + ": shard name '" + shard_name + "' for tensor '" +
                                 tensor + "' is not a file name in the model directory");
    auto it = opened.find(shard_name);
    if (it == opened.end()) {
      const std::string shard_path = dir_ + "/" + shard_name;
      if (!is_file(shard_path))
        fail(ErrorKind::Model, index_path + ": shard '" + shard_name + "' (named for tensor '" +
                                   tensor + "') does not exist");
      add_shard(shard_path);
      it = opened.emplace(shard_name, shards_.back().get()).first;
    }
    if (it->second->tensor(tensor) == nullptr)
      fail(ErrorKind::Model, index_path + ": tensor '" + tensor + "' is listed in shard '" +
                                 shard_name + "', which does not hold it");
  }
}

HfDirectory::Found HfDirectory::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? Found{nullptr, nullptr} : it->second;
}

}  // namespace ts
