// Writes the fuzzers' seed corpora: small writer-made files that reach every branch of the parsers'
// success paths, and shrunken copies of the shared fixtures (same metadata, tensor names, dtypes
// and ranks; arrays cut to a few entries and every tensor made one block, so a seed is a few KB).
// Usage: fuzz_make_seeds OUT_DIR [SHARED_DIR]. OUT_DIR gets gguf/, safetensors/ and hf_index/.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxArrayEntries = 16;

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) fail(ErrorKind::Runtime, path.string() + ": cannot write");
}

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  write_file(path, std::string(bytes.begin(), bytes.end()));
}

GgufArray ints(GgufType elem, std::vector<int64_t> v) {
  GgufArray a;
  a.elem = elem;
  a.ints = std::move(v);
  return a;
}

// One block of `dtype` per row, `rank` dims: the smallest tensor of that type and rank.
void add_one_block_tensor(GgufWriter& w, const std::string& name, DType dtype, size_t rank) {
  std::vector<uint64_t> dims(rank, 1);
  dims[0] = dtype_info(dtype).block_elems;
  const std::vector<uint8_t> data(dtype_info(dtype).block_bytes, 0x3c);
  w.add_tensor(name, dtype, dims, data.data(), data.size());
}

void gguf_synthetic(const fs::path& out) {
  {
    GgufWriter w;
    write_file(out / "empty.gguf", w.bytes());
  }
  {
    GgufWriter w(2);
    w.add_kv("general.architecture", gguf_string("llama"));
    add_one_block_tensor(w, "w", DType::F32, 2);
    write_file(out / "v2.gguf", w.bytes());
  }
  {
    GgufWriter w;
    w.set_alignment(64);
    const GgufType scalars[] = {GgufType::U8,  GgufType::I8,  GgufType::U16,
                                GgufType::I16, GgufType::U32, GgufType::I32,
                                GgufType::U64, GgufType::I64, GgufType::Bool};
    for (GgufType t : scalars) {
      w.add_kv(std::string("k.") + gguf_type_name(t), gguf_int(t, 1));
      w.add_kv(std::string("a.") + gguf_type_name(t), gguf_array(ints(t, {0, 1})));
    }
    w.add_kv("k.f32", gguf_float(GgufType::F32, 0.5));
    w.add_kv("k.f64", gguf_float(GgufType::F64, -0.5));
    w.add_kv("k.string", gguf_string("text"));
    GgufArray floats;
    floats.elem = GgufType::F32;
    floats.floats = {1, 2};
    w.add_kv("a.f32", gguf_array(floats));
    GgufArray strings;
    strings.elem = GgufType::String;
    strings.strings = {"x", ""};
    w.add_kv("a.string", gguf_array(strings));
    GgufArray nested;
    nested.elem = GgufType::Array;
    nested.nested.push_back(gguf_array(ints(GgufType::I32, {1})));
    nested.nested.push_back(gguf_array(strings));
    w.add_kv("a.nested", gguf_array(nested));
    add_one_block_tensor(w, "t4", DType::F16, 4);
    write_file(out / "every_kv_type.gguf", w.bytes());
  }
  {
    GgufWriter w;
    for (uint32_t id = 0; id < 64; ++id)
      if (dtype_info(id))
        add_one_block_tensor(w, std::string("t.") + dtype_info(id)->name, static_cast<DType>(id),
                             2);
    write_file(out / "every_dtype.gguf", w.bytes());
  }
  {
    // The first part of a split model of two; its partner is fuzz::SplitInput::second_part().
    GgufWriter w;
    w.add_kv("general.architecture", gguf_string("llama"));
    w.add_kv("split.no", gguf_int(GgufType::U16, 0));
    w.add_kv("split.count", gguf_int(GgufType::U16, 2));
    w.add_kv("split.tensors.count", gguf_int(GgufType::I32, 2));
    add_one_block_tensor(w, "split.a", DType::Q8_0, 2);
    write_file(out / "split-first-part.gguf", w.bytes());
  }
}

GgufValue shrink(const GgufValue& v) {
  if (v.type != GgufType::Array) return v;
  GgufArray a = *v.arr;
  a.ints.resize(std::min(a.ints.size(), kMaxArrayEntries));
  a.floats.resize(std::min(a.floats.size(), kMaxArrayEntries));
  a.strings.resize(std::min(a.strings.size(), kMaxArrayEntries));
  a.nested.resize(std::min(a.nested.size(), kMaxArrayEntries));
  for (GgufValue& n : a.nested) n = shrink(n);
  return gguf_array(std::move(a));
}

void gguf_shrunk(const fs::path& src, const fs::path& out) {
  const auto g = GgufFile::open(src.string());
  GgufWriter w(g->version());
  for (const auto& [key, value] : g->metadata()) {
    if (key == "general.alignment")
      w.set_alignment(static_cast<uint32_t>(value.i));
    else
      w.add_kv(key, shrink(value));
  }
  for (const GgufTensor& t : g->tensors()) add_one_block_tensor(w, t.name, t.dtype, t.dims.size());
  write_file(out, w.bytes());
}

std::string safetensors_bytes(const json& header) {
  std::string text = header.dump();
  uint64_t data = 0;
  for (const auto& [name, entry] : header.items())
    if (name != "__metadata__")
      data = std::max<uint64_t>(data, entry["data_offsets"][1].get<uint64_t>());
  const uint64_t n = text.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + text + std::string(data, '\x01');
}

// Entries laid out one after another, each `shape` x the dtype's size.
void add_st(json& header, uint64_t& at, const std::string& name, const std::string& dtype,
            size_t elem_bytes, const std::vector<uint64_t>& shape) {
  uint64_t n = elem_bytes;
  for (uint64_t d : shape) n *= d;
  header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {at, at + n}}};
  at += n;
}

void safetensors_synthetic(const fs::path& out) {
  write_file(out / "empty.safetensors", safetensors_bytes(json::object()));
  json h = {{"__metadata__", {{"format", "pt"}}}};
  uint64_t at = 0;
  const std::pair<const char*, size_t> dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2},
                                                   {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
                                                   {"U8", 1},  {"BOOL", 1}};
  for (const auto& [dtype, size] : dtypes)
    add_st(h, at, std::string("t.") + dtype, dtype, size, {2, 3});
  add_st(h, at, "scalar", "F32", 4, {});
  add_st(h, at, "empty", "F32", 4, {0, 4});
  add_st(h, at, "rank4", "F16", 2, {1, 2, 1, 2});
  write_file(out / "every_dtype.safetensors", safetensors_bytes(h));
}

void safetensors_shrunk(const fs::path& src, const fs::path& out) {
  const auto f = SafetensorsFile::open(src.string());
  json h = json::object();
  if (!f->metadata().empty()) h["__metadata__"] = f->metadata();
  uint64_t at = 0;
  for (const SafetensorsTensor& t : f->tensors()) {
    const size_t elem = dtype_info(t.dtype).block_bytes;
    std::string name = dtype_name(t.dtype);
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);
    add_st(h, at, t.name, name, elem, std::vector<uint64_t>(t.dims.size(), 1));
  }
  write_file(out, safetensors_bytes(h));
}

void hf_index_synthetic(const fs::path& out) {
  // Shard and tensor names of fuzz::HfScratchDir.
  write_file(out / "full.json", json({{"metadata", {{"total_size", 32}}},
                                      {"weight_map",
                                       {{"a", "s1.safetensors"},
                                        {"b", "s1.safetensors"},
                                        {"c", "s2.safetensors"},
                                        {"d", "s2.safetensors"}}}})
                                    .dump(1));
  write_file(out / "one_shard.json", json({{"weight_map", {{"a", "s1.safetensors"}}}}).dump());
  write_file(out / "wrong_shard.json", json({{"weight_map", {{"a", "s2.safetensors"}}}}).dump());
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix,
                                   const std::string& ext) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.rfind(prefix, 0) == 0 && e.path().extension() == ext)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int run(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: fuzz_make_seeds OUT_DIR [SHARED_DIR]\n");
    return 1;
  }
  const fs::path out = argv[1];
  for (const char* sub : {"gguf", "safetensors", "hf_index"}) fs::create_directories(out / sub);
  gguf_synthetic(out / "gguf");
  safetensors_synthetic(out / "safetensors");
  hf_index_synthetic(out / "hf_index");
  if (argc == 3 && fs::is_directory(argv[2])) {
    const fs::path shared = argv[2];
    std::vector<fs::path> families;
    for (const auto& e : fs::directory_iterator(shared / "fixtures"))
      if (e.is_directory()) families.push_back(e.path());
    std::sort(families.begin(), families.end());
    for (const fs::path& fam : families) {
      const std::string name = fam.filename().string();
      for (const fs::path& g : sorted_files(fam, "model-", ".gguf"))
        gguf_shrunk(g, out / "gguf" / (name + "-" + g.filename().string()));
      if (fs::exists(fam / "hf" / "model.safetensors"))
        safetensors_shrunk(fam / "hf" / "model.safetensors",
                           out / "safetensors" / (name + ".safetensors"));
    }
    // Quantised tensor types and a vocab-only file.
    const std::pair<const char*, const char*> quants[] = {
        {"quants/tiny-moe-Q4_K_M.gguf", "tiny-moe-q4_k_m.gguf"},
        {"model-q8_0.gguf", "tiny-moe-q8_0.gguf"}};
    for (const auto& [src, name] : quants)
      if (fs::exists(shared / "models/tiny-moe" / src))
        gguf_shrunk(shared / "models/tiny-moe" / src, out / "gguf" / name);
    if (fs::exists(shared / "fixtures/vocab/ggml-vocab-gpt-2.gguf"))
      gguf_shrunk(shared / "fixtures/vocab/ggml-vocab-gpt-2.gguf",
                  out / "gguf" / "vocab-gpt-2.gguf");
  }
  return 0;
}

}  // namespace
}  // namespace ts

int main(int argc, char** argv) {
  try {
    return ts::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
    return 1;
  }
}
