// Malformed GGUF files, built with the writer and then cut or patched: each must be refused with a
// ts::Error of kind Model whose one-line message names the problem. Needs no shared data.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats_test_util.h"

namespace ts {
namespace {

using test::throws_ts_error;

constexpr uint64_t k2p60 = uint64_t{1} << 60;

GgufArray string_array(std::vector<std::string> v) {
  GgufArray a;
  a.elem = GgufType::String;
  a.strings = std::move(v);
  return a;
}

GgufArray int_array(GgufType elem, std::vector<int64_t> v) {
  GgufArray a;
  a.elem = elem;
  a.ints = std::move(v);
  return a;
}

// `levels` arrays inside each other, the innermost holding one u8.
GgufArray nested(int levels) {
  GgufArray a = int_array(GgufType::U8, {1});
  for (int k = 1; k < levels; ++k) {
    GgufArray outer;
    outer.elem = GgufType::Array;
    outer.nested.push_back(gguf_array(std::move(a)));
    a = std::move(outer);
  }
  return a;
}

class GgufMalformed : public ::testing::Test {
 protected:
  // A small valid file: four key/values of different shapes, three tensors of three dtypes.
  static GgufWriter base_writer() {
    GgufWriter w;
    w.add_kv("general.architecture", gguf_string("llama"));
    w.add_kv("llama.block_count", gguf_int(GgufType::U32, 2));
    w.add_kv("tokenizer.ggml.tokens", gguf_array(string_array({"a", "bb", "ccc"})));
    w.add_kv("nested", gguf_array(nested(3)));
    add_tensors(w);
    return w;
  }
  static void add_tensors(GgufWriter& w) {
    const std::vector<uint8_t> a(64, 1), b(34, 2), c(8, 3);
    w.add_tensor("a", DType::F32, {8, 2}, a.data(), a.size());  // data [0, 64)
    w.add_tensor("b", DType::Q8_0, {32}, b.data(), b.size());   // data [64, 98)
    w.add_tensor("c", DType::F16, {4}, c.data(), c.size());     // data [128, 136)
  }
  static constexpr uint64_t kLastTensorEnd = 136;  // relative to the data section

  std::unique_ptr<GgufFile> open(const std::vector<uint8_t>& bytes) {
    const std::string path = dir_.file("m.gguf");
    test::write_file(path, bytes);
    return GgufFile::open(path);
  }
  ::testing::AssertionResult refused(const std::vector<uint8_t>& bytes, const std::string& needle) {
    return throws_ts_error([&] { open(bytes); }, ErrorKind::Model, needle);
  }
  // A file cut short must be refused as one, whichever check notices first.
  ::testing::AssertionResult refused_as_truncated(const std::vector<uint8_t>& bytes) {
    return test::throws_ts_error_any(
        [&] { open(bytes); }, ErrorKind::Model,
        {"too short for a GGUF header", "truncated: ", "exceeds the file",
         "run past the end of the file", "starts past the end of the file"});
  }
  static std::vector<uint8_t> cut(std::vector<uint8_t> b, uint64_t n) {
    b.resize(n);
    return b;
  }

  test::TempDir dir_;
};

TEST_F(GgufMalformed, BaseFileOpens) {
  const auto g = open(base_writer().bytes());
  EXPECT_EQ(g->metadata().size(), 4u);
  EXPECT_EQ(g->tensors().size(), 3u);
}

TEST_F(GgufMalformed, TruncatedAtEverySectionBoundary) {
  GgufLayout l;
  const auto b = base_writer().bytes(&l);
  EXPECT_TRUE(refused(cut(b, 0), "file is 0 bytes, too short for a GGUF header"));
  EXPECT_TRUE(refused(cut(b, 4), "too short for a GGUF header"));         // after the magic
  EXPECT_TRUE(refused(cut(b, 8), "too short for a GGUF header"));         // after the version
  EXPECT_TRUE(refused(cut(b, 16), "too short for a GGUF header"));        // after the tensor count
  EXPECT_TRUE(refused(cut(b, 24), "metadata count 4 exceeds the file"));  // after the kv count
  for (uint64_t off : l.kv_offsets) EXPECT_TRUE(refused_as_truncated(cut(b, off))) << off;
  EXPECT_TRUE(refused(cut(b, l.tensor_infos_begin), "truncated: name of tensor #0 length"));
  for (uint64_t off : l.tensor_info_offsets) EXPECT_TRUE(refused_as_truncated(cut(b, off))) << off;
  EXPECT_TRUE(
      refused(cut(b, l.data_begin), "tensor 'a': bytes [0, +64) run past the end of the file"));
  EXPECT_TRUE(refused(cut(b, l.data_begin + 64), "tensor 'b': bytes [64, +34) run past the end"));
  EXPECT_TRUE(refused(cut(b, l.data_begin + 128), "tensor 'c': bytes [128, +8) run past the end"));
  EXPECT_TRUE(refused(cut(b, l.data_begin + kLastTensorEnd - 1), "tensor 'c'"));
  // The padding after the last tensor is not needed.
  EXPECT_EQ(open(cut(b, l.data_begin + kLastTensorEnd))->tensors().size(), 3u);
}

TEST_F(GgufMalformed, TruncatedAtEveryByte) {
  GgufLayout l;
  const auto b = base_writer().bytes(&l);
  for (uint64_t n = 0; n < l.data_begin + kLastTensorEnd; ++n)
    ASSERT_TRUE(refused_as_truncated(cut(b, n))) << "cut at " << n;
}

TEST_F(GgufMalformed, AbsurdCounts) {
  auto b = base_writer().bytes();
  test::patch<uint64_t>(b, 8, k2p60);
  EXPECT_TRUE(refused(b, "tensor count 1152921504606846976 exceeds the file"));
  b = base_writer().bytes();
  test::patch<uint64_t>(b, 16, k2p60);
  EXPECT_TRUE(refused(b, "metadata count 1152921504606846976 exceeds the file"));
  b = base_writer().bytes();
  test::patch<uint64_t>(b, 16, ~uint64_t{0});
  EXPECT_TRUE(refused(b, "metadata count 18446744073709551615 exceeds the file"));
}

TEST_F(GgufMalformed, HugeStringLengths) {
  GgufLayout l;
  auto b = base_writer().bytes(&l);
  test::patch<uint64_t>(b, l.kv_offsets[0], uint64_t{1} << 62);  // the key's length
  EXPECT_TRUE(refused(b, "truncated: metadata key #0 needs 4611686018427387904 bytes"));

  b = base_writer().bytes(&l);
  const uint64_t value_len_at =
      l.kv_offsets[0] + 8 + std::string("general.architecture").size() + 4;
  test::patch<uint64_t>(b, value_len_at, ~uint64_t{0});
  EXPECT_TRUE(refused(b, "truncated: general.architecture needs 18446744073709551615 bytes"));

  b = base_writer().bytes(&l);
  test::patch<uint64_t>(b, l.tensor_info_offsets[1], k2p60);  // tensor name length
  EXPECT_TRUE(refused(b, "truncated: name of tensor #1 needs 1152921504606846976 bytes"));
}

TEST_F(GgufMalformed, HugeArrayLength) {
  GgufLayout l;
  auto b = base_writer().bytes(&l);
  const uint64_t len_at = l.kv_offsets[2] + 8 + std::string("tokenizer.ggml.tokens").size() + 4 + 4;
  test::patch<uint64_t>(b, len_at, k2p60);
  EXPECT_TRUE(
      refused(b, "tokenizer.ggml.tokens: array length 1152921504606846976 exceeds the file"));
  test::patch<uint64_t>(b, len_at, 4);  // one more string than there is
  EXPECT_TRUE(refused_as_truncated(b));
}

TEST_F(GgufMalformed, NestedArrayDepth) {
  GgufWriter ok;
  ok.add_kv("deep", gguf_array(nested(8)));
  EXPECT_EQ(open(ok.bytes())->get_array("deep")->nested.size(), 1u);

  GgufWriter w;
  w.add_kv("deep", gguf_array(nested(9)));
  EXPECT_TRUE(refused(w.bytes(), "deep: arrays nested deeper than 8"));
}

TEST_F(GgufMalformed, NestedArrayDepthBomb) {
  // A million nested one-element arrays: refused at depth 8, never recursed a million deep.
  std::vector<uint8_t> b = GgufWriter().bytes();
  b.resize(24);
  test::patch<uint64_t>(b, 16, 1);
  auto put = [&](auto v) {
    const size_t at = b.size();
    b.resize(at + sizeof v);
    std::memcpy(b.data() + at, &v, sizeof v);
  };
  put(uint64_t{4});
  b.insert(b.end(), {'b', 'o', 'm', 'b'});
  put(uint32_t{9});
  for (int k = 0; k < 1000000; ++k) {
    put(uint32_t{9});
    put(uint64_t{1});
  }
  EXPECT_TRUE(refused(b, "bomb: arrays nested deeper than 8"));
}

TEST_F(GgufMalformed, UnknownValueTypes) {
  GgufWriter w;
  GgufValue v;
  v.type = static_cast<GgufType>(13);
  w.add_kv("odd", v);
  EXPECT_TRUE(refused(w.bytes(), "odd: unknown metadata value type 13"));

  GgufWriter w2;
  GgufArray a;
  a.elem = static_cast<GgufType>(0x7fffffff);
  w2.add_kv("odd_array", gguf_array(a));
  EXPECT_TRUE(refused(w2.bytes(), "odd_array: unknown array element type 2147483647"));
}

TEST_F(GgufMalformed, BadScalarValues) {
  GgufWriter w;
  w.add_kv("flag", gguf_int(GgufType::Bool, 2));
  EXPECT_TRUE(refused(w.bytes(), "flag: bool value 2 is neither 0 nor 1"));

  GgufWriter w2;
  w2.add_kv("big", gguf_int(GgufType::U64, std::numeric_limits<int64_t>::min()));  // 2^63 as u64
  EXPECT_TRUE(refused(w2.bytes(), "big: u64 value 9223372036854775808 is out of range"));
}

TEST_F(GgufMalformed, UnknownTensorDtype) {
  for (uint32_t id : {4u, 99u, 0x10000u /* safetensors-only U8 */, 0xffffffffu}) {
    GgufWriter w;
    w.add_raw_tensor_info("w", id, {32}, 0);
    EXPECT_TRUE(refused(w.bytes(), "tensor 'w': unknown ggml type id " + std::to_string(id)));
  }
}

TEST_F(GgufMalformed, BadDimensions) {
  const uint32_t f32 = static_cast<uint32_t>(DType::F32);
  struct Case {
    std::vector<uint64_t> dims;
    uint32_t type;
    std::string needle;
  };
  const Case cases[] = {
      {{}, f32, "tensor 'w': 0 dimensions (1..4 allowed)"},
      {{1, 1, 1, 1, 1}, f32, "tensor 'w': 5 dimensions (1..4 allowed)"},
      {{4, 0}, f32, "tensor 'w': dimension 1 = 0 is out of range"},
      {{(uint64_t{1} << 40) + 1}, f32, "tensor 'w': dimension 0 = 1099511627777 is out of range"},
      {{uint64_t{1} << 40, uint64_t{1} << 40, uint64_t{1} << 40},
       f32,
       "tensor 'w': size overflows 64 bits"},
      {{uint64_t{1} << 40, uint64_t{1} << 30}, f32, "tensor 'w': size overflows 64 bits"},
      {{33},
       static_cast<uint32_t>(DType::Q8_0),
       "row of 33 elements is not a whole number of q8_0 blocks"},
      {{48},
       static_cast<uint32_t>(DType::MXFP4),
       "row of 48 elements is not a whole number of mxfp4 blocks"},
  };
  for (const Case& c : cases) {
    GgufWriter w;
    w.add_raw_tensor_info("w", c.type, c.dims, 0);
    EXPECT_TRUE(refused(w.bytes(), c.needle));
  }
}

TEST_F(GgufMalformed, TensorOffsets) {
  const uint32_t f32 = static_cast<uint32_t>(DType::F32);
  {
    GgufWriter w = base_writer();
    w.add_raw_tensor_info("far", f32, {4}, uint64_t{1} << 20);
    EXPECT_TRUE(
        refused(w.bytes(), "tensor 'far': bytes [1048576, +16) run past the end of the file"));
  }
  {
    GgufWriter w = base_writer();
    w.add_raw_tensor_info("wrap", f32, {8}, ~uint64_t{31});  // offset + size would wrap 64 bits
    EXPECT_TRUE(
        refused(w.bytes(), "tensor 'wrap': bytes [18446744073709551584, +32) run past the end"));
  }
  {
    GgufWriter w = base_writer();
    w.add_raw_tensor_info("odd", f32, {4}, 4);
    EXPECT_TRUE(refused(w.bytes(), "tensor 'odd': offset 4 is not aligned to 32"));
  }
  {
    GgufWriter w = base_writer();
    w.add_raw_tensor_info("inside_a", f32, {8}, 32);
    EXPECT_TRUE(refused(w.bytes(), "tensors 'a' and 'inside_a' overlap"));
  }
  {
    GgufWriter w = base_writer();
    w.add_raw_tensor_info("same_as_c", f32, {2}, 128);
    EXPECT_TRUE(refused(w.bytes(), "overlap"));
  }
}

TEST_F(GgufMalformed, DuplicateNames) {
  GgufWriter w = base_writer();
  const std::vector<uint8_t> d(8, 0);
  w.add_tensor("b", DType::F32, {2}, d.data(), d.size());
  EXPECT_TRUE(refused(w.bytes(), "duplicate tensor name 'b'"));

  GgufWriter w2 = base_writer();
  w2.add_kv("llama.block_count", gguf_int(GgufType::U32, 3));
  EXPECT_TRUE(refused(w2.bytes(), "duplicate metadata key 'llama.block_count'"));
}

TEST_F(GgufMalformed, NamesFromTheFileCannotBreakTheMessageLine) {
  GgufWriter w;
  w.add_kv("a\nb\x1b[2J", gguf_int(GgufType::U8, 1));
  w.add_kv("a\nb\x1b[2J", gguf_int(GgufType::U8, 1));
  EXPECT_TRUE(refused(w.bytes(), "duplicate metadata key 'a\\x0ab\\x1b[2J'"));
}

TEST_F(GgufMalformed, BadAlignment) {
  struct Case {
    GgufValue value;
    std::string needle;
  };
  const Case cases[] = {
      {gguf_int(GgufType::U32, 3), "general.alignment = 3 is not a power of two"},
      {gguf_int(GgufType::U32, 0), "general.alignment = 0 is not a power of two"},
      {gguf_int(GgufType::I32, -32), "general.alignment = -32 is not a power of two"},
      {gguf_int(GgufType::U64, int64_t{1} << 40),
       "general.alignment = 1099511627776 is not a power of two in 1..16777216"},
      {gguf_string("32"), "general.alignment has type string, expected u32"},
      {gguf_float(GgufType::F32, 32), "general.alignment has type f32, expected u32"},
  };
  for (const Case& c : cases) {
    GgufWriter w;
    w.add_kv("general.alignment", c.value);
    add_tensors(w);
    EXPECT_TRUE(refused(w.bytes(), c.needle));
  }
  // A valid non-default alignment moves the data section and is enforced on offsets.
  GgufWriter w;
  w.set_alignment(256);
  w.add_raw_tensor_info("w", static_cast<uint32_t>(DType::F32), {4}, 32);
  EXPECT_TRUE(refused(w.bytes(), "tensor 'w': offset 32 is not aligned to 256"));
}

TEST_F(GgufMalformed, VersionsAndMagic) {
  auto b = base_writer().bytes();
  test::patch<uint32_t>(b, 4, 1);
  EXPECT_TRUE(refused(b, "GGUF version 1 is not supported"));
  test::patch<uint32_t>(b, 4, 4);
  EXPECT_TRUE(refused(b, "unsupported GGUF version 4"));
  test::patch<uint32_t>(b, 4, 0x03000000);  // version 3 written big-endian
  EXPECT_TRUE(refused(b, "big-endian GGUF files are not supported"));
  b = base_writer().bytes();
  b[3] = 'G';
  EXPECT_TRUE(refused(b, "not a GGUF file (bad magic)"));
}

TEST_F(GgufMalformed, NotAFile) {
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(dir_.file("absent.gguf")); }, ErrorKind::Model,
                              "absent.gguf: cannot open: No such file or directory"));
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(dir_.path()); }, ErrorKind::Model,
                              "not a regular file"));
  const std::string fifo = dir_.file("fifo.gguf");  // refused at once, not waited on
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(
      throws_ts_error([&] { GgufFile::open(fifo); }, ErrorKind::Model, "not a regular file"));
}

// Bytes past the header limit are never read as metadata, however large the (sparse) file: a
// corrupt length there must not turn gigabytes of tensor data into metadata.
TEST_F(GgufMalformed, HeaderLimitOnHugeFile) {
  for (bool as_array : {true, false}) {
    GgufWriter w;
    if (as_array) {
      w.add_kv("big", gguf_array(int_array(GgufType::U8, {})));
    } else {
      w.add_kv("big", gguf_string(""));
    }
    GgufLayout l;
    auto b = w.bytes(&l);
    const uint64_t len_at = l.kv_offsets[0] + 8 + 3 + 4 + (as_array ? 4 : 0);
    test::patch<uint64_t>(b, len_at, uint64_t{1} << 29);
    const std::string path = dir_.file("huge.gguf");
    test::write_file(path, b);
    ASSERT_EQ(::truncate(path.c_str(), uint64_t{1} << 30), 0);
    EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(path); }, ErrorKind::Model,
                                as_array ? "big: array length 536870912 exceeds the file"
                                         : "the header would exceed the 268435456-byte limit"));
  }
}

}  // namespace
}  // namespace ts
