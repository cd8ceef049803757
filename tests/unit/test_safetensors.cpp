// Safetensors reader and Hugging Face directory: valid files read right (dtypes, GGML-order dims,
// absolute offsets, metadata), malformed ones refused with a message naming the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "formats_test_util.h"

namespace ts {
namespace {

using test::safetensors_bytes;
using test::throws_ts_error;

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i);
  return b;
}

class Safetensors : public ::testing::Test {
 protected:
  std::unique_ptr<SafetensorsFile> open(const std::vector<uint8_t>& bytes) {
    const std::string path = dir_.file("m.safetensors");
    test::write_file(path, bytes);
    return SafetensorsFile::open(path);
  }
  ::testing::AssertionResult refused(const std::string& header, size_t data_bytes,
                                     const std::string& needle, ErrorKind kind = ErrorKind::Model) {
    return throws_ts_error([&] { open(safetensors_bytes(header, iota_bytes(data_bytes))); }, kind,
                           needle);
  }

  test::TempDir dir_;
};

TEST_F(Safetensors, ReadsEveryDtypeShapeAndOffset) {
  const std::string header = R"({
    "__metadata__": {"format": "pt", "note": "x"},
    "w.f32": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    "w.f16": {"dtype": "F16", "shape": [4], "data_offsets": [24, 32]},
    "w.bf16": {"dtype": "BF16", "shape": [1, 2, 2], "data_offsets": [32, 40]},
    "w.f64": {"dtype": "F64", "shape": [1], "data_offsets": [40, 48]},
    "w.i64": {"dtype": "I64", "shape": [1], "data_offsets": [48, 56]},
    "w.i32": {"dtype": "I32", "shape": [1], "data_offsets": [56, 60]},
    "w.i16": {"dtype": "I16", "shape": [2], "data_offsets": [60, 64]},
    "w.i8": {"dtype": "I8", "shape": [2], "data_offsets": [64, 66]},
    "w.u8": {"dtype": "U8", "shape": [1], "data_offsets": [66, 67]},
    "w.bool": {"dtype": "BOOL", "shape": [], "data_offsets": [67, 68]},
    "w.empty": {"dtype": "F32", "shape": [0, 5], "data_offsets": [68, 68]}
  })";
  const auto f = open(safetensors_bytes(header, iota_bytes(68)));
  ASSERT_EQ(f->tensors().size(), 11u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("note"), "x");
  const uint64_t data_begin = 8 + header.size();

  struct Want {
    const char* name;
    DType dtype;
    std::vector<uint64_t> dims;
    uint64_t begin, nbytes;
  };
  const Want want[] = {
      {"w.f32", DType::F32, {3, 2}, 0, 24},      {"w.f16", DType::F16, {4}, 24, 8},
      {"w.bf16", DType::BF16, {2, 2, 1}, 32, 8}, {"w.f64", DType::F64, {1}, 40, 8},
      {"w.i64", DType::I64, {1}, 48, 8},         {"w.i32", DType::I32, {1}, 56, 4},
      {"w.i16", DType::I16, {2}, 60, 4},         {"w.i8", DType::I8, {2}, 64, 2},
      {"w.u8", DType::U8, {1}, 66, 1},           {"w.bool", DType::Bool, {}, 67, 1},
      {"w.empty", DType::F32, {5, 0}, 68, 0}};
  for (const Want& w : want) {
    const SafetensorsTensor* t = f->tensor(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->dtype, w.dtype) << w.name;
    EXPECT_EQ(t->dims, w.dims) << w.name;  // GGML order: the file's shape reversed
    EXPECT_EQ(t->offset, data_begin + w.begin) << w.name;
    EXPECT_EQ(t->nbytes, w.nbytes) << w.name;
    if (w.nbytes > 0) {
      EXPECT_EQ(f->tensor_data(*t)[0], static_cast<uint8_t>(w.begin))
          << w.name;  // through the mmap
      EXPECT_EQ(f->tensor_data(*t), f->file().data() + data_begin + w.begin) << w.name;
    }
  }
  EXPECT_EQ(f->tensor("absent"), nullptr);
  for (size_t k = 1; k < f->tensors().size(); ++k)
    EXPECT_LE(f->tensors()[k - 1].offset, f->tensors()[k].offset);
}

TEST_F(Safetensors, HeaderPaddingAndNoTensors) {
  EXPECT_EQ(open(safetensors_bytes("{}", {}))->tensors().size(), 0u);
  const auto f = open(safetensors_bytes(
      R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}   )", iota_bytes(2)));
  EXPECT_EQ(f->tensor("a")->nbytes, 2u);
}

TEST_F(Safetensors, BadHeaderLength) {
  EXPECT_TRUE(throws_ts_error(
      [&] {
        open({1, 2, 3});
      },
      ErrorKind::Model, "file is 3 bytes, too short"));
  auto b = safetensors_bytes("{}", {});
  test::patch<uint64_t>(b, 0, 3);
  EXPECT_TRUE(throws_ts_error([&] { open(b); }, ErrorKind::Model,
                              "header length 3 runs past the end of the file (10 bytes)"));
  test::patch<uint64_t>(b, 0, ~uint64_t{0});
  EXPECT_TRUE(
      throws_ts_error([&] { open(b); }, ErrorKind::Model,
                      "header length 18446744073709551615 exceeds the 100000000-byte limit"));
}

TEST_F(Safetensors, BadJson) {
  EXPECT_TRUE(refused("{\"a\": ", 0, "header is not valid JSON"));
  EXPECT_TRUE(refused("", 0, "header is not valid JSON"));
  EXPECT_TRUE(refused("{\"a\xff\": 1}", 0, "header is not valid JSON"));  // invalid UTF-8
  EXPECT_TRUE(refused("[1, 2]", 0, "header is not a JSON object"));
  EXPECT_TRUE(refused("{\"a\": 1}", 0, "tensor 'a': entry is not a JSON object"));
  EXPECT_TRUE(refused(R"({"__metadata__": []})", 0, "__metadata__ is not a JSON object"));
  EXPECT_TRUE(refused(R"({"__metadata__": {"k": 1}})", 0, "__metadata__ 'k' is not a string"));
}

TEST_F(Safetensors, DeepJsonIsRefusedEarly) {
  const std::string deep = "{\"a\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_TRUE(refused(deep, 0, "header: JSON nested deeper than 64 levels"));
  std::string objects;
  for (int k = 0; k < 100000; ++k) objects += "{\"a\":";
  EXPECT_TRUE(refused(objects, 0, "header: JSON nested deeper than 64 levels"));
  // 64 levels are fine as JSON (and then refused as a tensor entry).
  const std::string ok = "{\"a\": " + std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_TRUE(refused(ok, 0, "tensor 'a': entry is not a JSON object"));
}

TEST_F(Safetensors, BadTensorEntries) {
  EXPECT_TRUE(refused(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4,
                      "tensor 'w': missing or non-string 'dtype'"));
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4,
                      "tensor 'w': missing or non-array 'shape'"));
  EXPECT_TRUE(
      refused(R"({"w": {"dtype": "F32", "shape": [1]}})", 4, "'data_offsets' is not a pair"));
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4,
                      "'data_offsets' is not a pair"));
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4,
                      "'data_offsets' is not a pair"));
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4,
                      "'shape' holds -1, not a non-negative integer"));
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4,
                      "'shape' holds 1.5"));
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F32", "shape": ["1"], "data_offsets": [0, 4]}})", 4,
                      "'shape' holds \"1\""));
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4,
                      "data_offsets [4, 0) are reversed"));
}

TEST_F(Safetensors, ShapeSizeMismatch) {
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", 16,
                      "tensor 'w': shape x f32 is 16 bytes but data_offsets span 12"));
  EXPECT_TRUE(refused(R"({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})", 8,
                      "shape x bf16 is 6 bytes but data_offsets span 8"));
  EXPECT_TRUE(refused(
      R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 4]}})",
      4, "tensor 'w' shape: size overflows 64 bits"));
  EXPECT_TRUE(
      refused(R"({"w": {"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 8]}})",
              8, "tensor 'w' shape: size overflows 64 bits"));
}

TEST_F(Safetensors, Dtypes) {
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F12", "shape": [1], "data_offsets": [0, 1]}})", 1,
                      "tensor 'w': unknown dtype 'F12'"));
  EXPECT_TRUE(refused(R"({"w": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}})", 4,
                      "tensor 'w': unknown dtype 'f32'"));
  for (const char* d : {"F8_E5M2", "U32", "C64"}) {
    EXPECT_TRUE(refused(
        std::string(R"({"w": {"dtype": ")") + d + R"(", "shape": [1], "data_offsets": [0, 1]}})", 1,
        std::string("tensor 'w' has dtype ") + d + ", which is not supported",
        ErrorKind::Unsupported));
  }
}

TEST_F(Safetensors, NamesFromTheFileCannotBreakTheMessageLine) {
  EXPECT_TRUE(refused(R"({"x\ny": {"dtype": "F12", "shape": [1], "data_offsets": [0, 1]}})", 1,
                      "tensor 'x\\x0ay': unknown dtype 'F12'"));
  EXPECT_TRUE(refused(R"({"k\r": 1, "k\r": 2})", 0, "header: duplicate key 'k\\x0d'"));
}

TEST_F(Safetensors, OffsetsPastEnd) {
  EXPECT_TRUE(refused(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 8,
                      "tensor 'w': data_offsets [4, 12) run past the end of the data (8 bytes)"));
  EXPECT_TRUE(refused(
      R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [18446744073709551615, 18446744073709551615]}})",
      8, "run past the end of the data"));
}

TEST_F(Safetensors, Overlaps) {
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                      12, "tensors 'a' and 'b' overlap"));
  EXPECT_TRUE(refused(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                          "b": {"dtype": "U8", "shape": [1], "data_offsets": [8, 9]}})",
                      16, "tensors 'a' and 'b' overlap"));
  // An empty tensor may sit inside another's range; it occupies nothing.
  const auto f =
      open(safetensors_bytes(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                           "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}})",
                             iota_bytes(16)));
  EXPECT_EQ(f->tensors().size(), 2u);
}

TEST_F(Safetensors, DuplicateKeys) {
  EXPECT_TRUE(refused(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                          "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                      2, "header: duplicate key 'a'"));
  EXPECT_TRUE(
      refused(R"({"a": {"dtype": "U8", "dtype": "F32", "shape": [1], "data_offsets": [0, 1]}})", 4,
              "header: duplicate key 'dtype'"));
  // Equal keys in different objects are fine.
  EXPECT_EQ(open(safetensors_bytes(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                       "b": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                                   iota_bytes(2)))
                ->tensors()
                .size(),
            2u);
}

TEST_F(Safetensors, TruncatedAtEveryByte) {
  const auto full = safetensors_bytes(R"({"__metadata__": {"format": "pt"},
      "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
      "b": {"dtype": "F16", "shape": [3], "data_offsets": [16, 22]}})",
                                      iota_bytes(22));
  EXPECT_EQ(open(full)->tensors().size(), 2u);
  for (size_t n = 0; n < full.size(); ++n) {
    const std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    ASSERT_TRUE(test::throws_ts_error_any(
        [&] { open(cut); }, ErrorKind::Model,
        {"too short", "runs past the end of the file", "run past the end of the data"}))
        << "cut at " << n;
  }
}

class HfDir : public ::testing::Test {
 protected:
  static std::vector<uint8_t> shard(const std::vector<std::string>& names) {
    std::string header = "{";
    for (size_t k = 0; k < names.size(); ++k) {
      if (k > 0) header += ",";
      header += "\"" + names[k] + "\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [" +
                std::to_string(8 * k) + ", " + std::to_string(8 * k + 8) + "]}";
    }
    return safetensors_bytes(header + "}", iota_bytes(8 * names.size()));
  }
  void write(const std::string& name, const std::string& text) {
    test::write_file(dir_.file(name), text);
  }
  void write(const std::string& name, const std::vector<uint8_t>& b) {
    test::write_file(dir_.file(name), b);
  }
  void write_index(const std::string& weight_map) {
    write("model.safetensors.index.json",
          R"({"metadata": {"total_size": 32}, "weight_map": )" + weight_map + "}");
  }
  ::testing::AssertionResult refused(const std::string& needle) {
    return throws_ts_error([&] { HfDirectory::open(dir_.path()); }, ErrorKind::Model, needle);
  }

  test::TempDir dir_;
};

TEST_F(HfDir, SingleFile) {
  write("config.json", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})");
  write("model.safetensors", shard({"x", "y"}));
  const auto d = HfDirectory::open(dir_.path() + "/");
  EXPECT_EQ(d->config().at("hidden_size"), 64);
  ASSERT_EQ(d->shards().size(), 1u);
  const auto y = d->find("y");
  ASSERT_NE(y.tensor, nullptr);
  EXPECT_EQ(y.file, d->shards()[0].get());
  EXPECT_EQ(y.tensor->dims, (std::vector<uint64_t>{2}));
  EXPECT_EQ(d->find("z").tensor, nullptr);
}

TEST_F(HfDir, Sharded) {
  write("config.json", "{}");
  write("model-00001-of-00002.safetensors", shard({"a", "b"}));
  write("model-00002-of-00002.safetensors", shard({"c"}));
  write_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                  "c": "model-00002-of-00002.safetensors"})");
  const auto d = HfDirectory::open(dir_.path());
  ASSERT_EQ(d->shards().size(), 2u);  // each shard opened once
  EXPECT_NE(d->find("a").file, d->find("c").file);
  EXPECT_EQ(d->find("a").file, d->find("b").file);
  EXPECT_EQ(d->find("c").tensor->name, "c");
}

TEST_F(HfDir, MissingOrBadConfig) {
  write("model.safetensors", shard({"x"}));
  EXPECT_TRUE(refused("no config.json (not a Hugging Face model directory)"));
  write("config.json", "{\"a\": 1,}");
  EXPECT_TRUE(refused("config.json is not valid JSON"));
  write("config.json", "[1]");
  EXPECT_TRUE(refused("config.json: not a JSON object"));
  write("config.json", R"({"hidden_size": 64, "hidden_size": 128})");
  EXPECT_TRUE(refused("config.json: duplicate key 'hidden_size'"));
  EXPECT_TRUE(throws_ts_error([&] { HfDirectory::open(dir_.file("absent")); }, ErrorKind::Model,
                              "no config.json"));
}

TEST_F(HfDir, NoWeights) {
  write("config.json", "{}");
  EXPECT_TRUE(refused("neither model.safetensors nor model.safetensors.index.json"));
}

TEST_F(HfDir, BadShardFileNamesTheFile) {
  write("config.json", "{}");
  write("model.safetensors", std::string("\x03\0\0\0\0\0\0\0{}", 10));
  EXPECT_TRUE(refused("model.safetensors: header length 3 runs past the end"));
}

TEST_F(HfDir, IndexNamingAMissingShard) {
  write("config.json", "{}");
  write("model-00001-of-00002.safetensors", shard({"a"}));
  write_index(
      R"({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})");
  EXPECT_TRUE(
      refused("shard 'model-00002-of-00002.safetensors' (named for tensor 'b') does not exist"));
}

TEST_F(HfDir, IndexNamingTheWrongShard) {
  write("config.json", "{}");
  write("s1.safetensors", shard({"a"}));
  write("s2.safetensors", shard({"b"}));
  write_index(R"({"a": "s2.safetensors", "b": "s2.safetensors"})");
  EXPECT_TRUE(refused("tensor 'a' is listed in shard 's2.safetensors', which does not hold it"));
}

TEST_F(HfDir, TensorInTwoShards) {
  write("config.json", "{}");
  write("s1.safetensors", shard({"a", "b"}));
  write("s2.safetensors", shard({"b"}));
  write_index(R"({"a": "s1.safetensors", "b": "s2.safetensors"})");
  EXPECT_TRUE(refused("tensor 'b' is also in"));
}

TEST_F(HfDir, BadIndex) {
  write("config.json", "{}");
  write("s1.safetensors", shard({"a"}));
  write_index(R"({"a": "../s1.safetensors"})");
  EXPECT_TRUE(refused(
      "shard name '../s1.safetensors' for tensor 'a' is not a file name in the model directory"));
  write_index(R"({"a": 3})");
  EXPECT_TRUE(refused("weight_map entry for 'a' is not a string"));
  write_index("{}");
  EXPECT_TRUE(refused("missing or empty 'weight_map' object"));
  write("model.safetensors.index.json",
        R"({"weight_map": {"a": "s1.safetensors"}, "weight_map": {}})");
  EXPECT_TRUE(refused("model.safetensors.index.json: duplicate key 'weight_map'"));
  write("model.safetensors.index.json", "not json");
  EXPECT_TRUE(refused("model.safetensors.index.json is not valid JSON"));
}

}  // namespace
}  // namespace ts
