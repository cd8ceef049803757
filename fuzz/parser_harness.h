// What one fuzz input does: it is put in a file, opened with a parser, and either refused with a
// ts::Error (the check returns false) or accepted (true), in which case every byte range the
// parser hands out must lie inside the file. Shared by the libFuzzer targets and the replay test
// (tests/unit/test_fuzz_replay.cpp), so both hold the parsers to the same rules. Any other
// exception escapes: it is a bug, reported as a crash by libFuzzer and as a failure by the test.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"

namespace ts::fuzz {

[[noreturn]] inline void violated(const std::string& what) {
  std::fprintf(stderr, "parser invariant violated: %s\n", what.c_str());
  std::abort();
}

// An in-memory file (memfd) whose contents are replaced by each input; parsers open it by path.
class InputFile {
 public:
  InputFile() : fd_(::memfd_create("ts_fuzz_input", 0)) {
    if (fd_ < 0) violated("memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  void set(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 ||
        (size > 0 && ::pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size)))
      violated("cannot write the input to the memfd");
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// The input as the first part of a split model of two (`DIR/in-00001-of-00002.gguf`), beside a
// fixed valid second part (split.no 1, split.count 2, split.tensors.count 2, one f32 tensor
// "split.b"): opening the input then reads its split.* keys, finds the second part by name and
// checks the two against each other. A seed whose split keys agree (fuzz/corpus/gguf/split-*.gguf)
// opens as a whole model.
class SplitInput {
 public:
  SplitInput() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ts_fuzz_split_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) violated("mkdtemp failed");
    dir_ = tmpl;
    path_ = dir_ + "/in-00001-of-00002.gguf";
    std::ofstream(dir_ + "/in-00002-of-00002.gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(second_part().data()),
               static_cast<std::streamsize>(second_part().size()));
  }
  ~SplitInput() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  SplitInput(const SplitInput&) = delete;
  SplitInput& operator=(const SplitInput&) = delete;

  void set(const uint8_t* data, size_t size) {
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) violated("cannot write the split input");
  }
  const std::string& path() const { return path_; }

  // The second part, byte by byte: GGUF v3, 1 tensor, 3 key/values, alignment 32.
  static const std::vector<uint8_t>& second_part() {
    static const std::vector<uint8_t> bytes = [] {
      std::vector<uint8_t> b;
      auto put = [&](const void* p, size_t n) {
        b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
      };
      auto u32 = [&](uint32_t v) { put(&v, 4); };
      auto u64 = [&](uint64_t v) { put(&v, 8); };
      auto str = [&](const std::string& v) {
        u64(v.size());
        put(v.data(), v.size());
      };
      auto kv_int = [&](const std::string& key, uint32_t type, int64_t v, size_t n) {
        str(key);
        u32(type);
        put(&v, n);
      };
      u32(0x46554747);
      u32(3);
      u64(1);                                  // tensors
      u64(3);                                  // key/values
      kv_int("split.no", 2, 1, 2);             // u16
      kv_int("split.count", 2, 2, 2);          // u16
      kv_int("split.tensors.count", 5, 2, 4);  // i32
      str("split.b");
      u32(1);
      u64(8);
      u32(0);  // f32
      u64(0);
      b.resize((b.size() + 31) / 32 * 32, 0);
      b.resize(b.size() + 32, 0);
      return b;
    }();
    return bytes;
  }

 private:
  std::string dir_;
  std::string path_;
};

// Parsers refuse with a one-line Model or Unsupported error; any other kind is a bug.
inline bool refused(const Error& e) {
  if (e.kind() != ErrorKind::Model && e.kind() != ErrorKind::Unsupported)
    violated(std::string("refused with error kind ") + std::to_string(static_cast<int>(e.kind())) +
             ": " + e.what());
  if (std::string_view(e.what()).find('\n') != std::string_view::npos)
    violated(std::string("multi-line error: ") + e.what());
  return false;
}

inline bool check_gguf(const std::string& path) {
  std::unique_ptr<GgufFile> g;
  try {
    g = GgufFile::open(path);
  } catch (const Error& e) {
    return refused(e);
  }
  if (g->alignment() == 0 || (g->alignment() & (g->alignment() - 1)) != 0)
    violated("gguf alignment");
  for (const GgufTensor& t : g->tensors()) {
    if (t.part >= g->part_count()) violated("gguf tensor '" + t.name + "' part");
    const uint64_t size = g->file(t.part).size();
    // The data section and alignment reported are the first part's.
    if (t.part == 0 &&
        (t.offset < g->data_offset() || (t.offset - g->data_offset()) % g->alignment() != 0))
      violated("gguf tensor '" + t.name + "' offset");
    if (t.offset > size || t.nbytes > size - t.offset)
      violated("gguf tensor '" + t.name + "' range");
    if (t.dims.empty() || t.dims.size() > 4) violated("gguf tensor '" + t.name + "' dims");
    if (g->tensor(t.name) != &t) violated("gguf tensor index");
    volatile uint8_t last = g->tensor_data(t)[t.nbytes - 1];  // the range is really mapped
    (void)last;
  }
  for (const auto& [key, value] : g->metadata()) {
    if (g->find(key) != &value) violated("gguf metadata index");
    if (value.type == GgufType::Array && !value.arr) violated("gguf array without elements");
  }
  return true;
}

inline void check_safetensors(const SafetensorsFile& f) {
  const uint64_t size = f.file().size();
  for (const SafetensorsTensor& t : f.tensors()) {
    if (t.offset < 8 || t.offset > size || t.nbytes > size - t.offset)
      violated("safetensors tensor '" + t.name + "' range");
    if (f.tensor(t.name) != &t) violated("safetensors tensor index");
    if (t.nbytes > 0) {
      volatile uint8_t last = f.tensor_data(t)[t.nbytes - 1];
      (void)last;
    }
  }
}

inline bool check_safetensors(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f;
  try {
    f = SafetensorsFile::open(path);
  } catch (const Error& e) {
    return refused(e);
  }
  check_safetensors(*f);
  return true;
}

// A temporary directory whose files the inputs replace; removed with its owner.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ts_fuzz_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) violated("mkdtemp failed");
    dir_ = tmpl;
  }
  ~ScratchDir() { std::filesystem::remove_all(dir_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  void write(const std::string& name, const uint8_t* data, size_t size) {
    std::ofstream f(dir_ + "/" + name, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) violated("cannot write " + name);
  }
  void write(const std::string& name, const std::string& bytes) {
    write(name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// A model directory with a fixed config.json and two small shards, whose
// model.safetensors.index.json is each input.
class HfScratchDir {
 public:
  HfScratchDir() {
    dir_.write("config.json", "{\"architectures\": [\"LlamaForCausalLM\"]}");
    dir_.write("s1.safetensors",
               shard("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[8,16]}}"));
    dir_.write("s2.safetensors",
               shard("{\"c\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                     "\"d\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]}}"));
  }

  void set_index(const uint8_t* data, size_t size) {
    dir_.write("model.safetensors.index.json", data, size);
  }
  const std::string& dir() const { return dir_.dir(); }

 private:
  static std::string shard(const std::string& header) {
    const uint64_t n = header.size();
    return std::string(reinterpret_cast<const char*>(&n), 8) + header + std::string(16, '\x01');
  }

  ScratchDir dir_;
};

inline bool check_hf_dir(const std::string& dir) {
  std::unique_ptr<HfDirectory> d;
  try {
    d = HfDirectory::open(dir);
  } catch (const Error& e) {
    return refused(e);
  }
  if (!d->config().is_object()) violated("hf config is not an object");
  for (const auto& shard : d->shards()) {
    check_safetensors(*shard);
    for (const SafetensorsTensor& t : shard->tensors()) {
      const HfDirectory::Found found = d->find(t.name);
      if (found.file != shard.get() || found.tensor != &t) violated("hf index of '" + t.name + "'");
    }
  }
  return true;
}

}  // namespace ts::fuzz
