// GGUF reader: a writer -> reader round trip of every metadata type and tensor layout, and every
// GGUF and HF fixture of the shared data opening (skipped when the shared data is absent).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "formats_test_util.h"
#include "test_paths.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

GgufArray int_array(GgufType elem, std::vector<int64_t> v) {
  GgufArray a;
  a.elem = elem;
  a.ints = std::move(v);
  return a;
}

GgufArray float_array(GgufType elem, std::vector<double> v) {
  GgufArray a;
  a.elem = elem;
  a.floats = std::move(v);
  return a;
}

GgufArray string_array(std::vector<std::string> v) {
  GgufArray a;
  a.elem = GgufType::String;
  a.strings = std::move(v);
  return a;
}

GgufArray nested_array(std::vector<GgufArray> v) {
  GgufArray a;
  a.elem = GgufType::Array;
  for (GgufArray& e : v) a.nested.push_back(gguf_array(std::move(e)));
  return a;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

// Every scalar type at its extremes, every array element type, nested arrays and tensors of
// plain and block types; alignment 64 so that padding is exercised.
GgufWriter every_type_writer(uint32_t version) {
  GgufWriter w(version);
  w.set_alignment(64);
  w.add_kv("u8", gguf_int(GgufType::U8, 255));
  w.add_kv("i8", gguf_int(GgufType::I8, -128));
  w.add_kv("u16", gguf_int(GgufType::U16, 65535));
  w.add_kv("i16", gguf_int(GgufType::I16, -32768));
  w.add_kv("u32", gguf_int(GgufType::U32, 4294967295));
  w.add_kv("i32", gguf_int(GgufType::I32, std::numeric_limits<int32_t>::min()));
  w.add_kv("f32", gguf_float(GgufType::F32, 1.5));
  w.add_kv("bool", gguf_int(GgufType::Bool, 1));
  w.add_kv("string", gguf_string("h\xc3\xa9llo, \"world\"\n"));
  w.add_kv("empty_string", gguf_string(""));
  w.add_kv("u64", gguf_int(GgufType::U64, std::numeric_limits<int64_t>::max()));
  w.add_kv("i64", gguf_int(GgufType::I64, std::numeric_limits<int64_t>::min()));
  w.add_kv("f64", gguf_float(GgufType::F64, M_PI));
  w.add_kv("arr.u8", gguf_array(int_array(GgufType::U8, {0, 1, 255})));
  w.add_kv("arr.i8", gguf_array(int_array(GgufType::I8, {-128, 127})));
  w.add_kv("arr.u16", gguf_array(int_array(GgufType::U16, {65535})));
  w.add_kv("arr.i16", gguf_array(int_array(GgufType::I16, {-2, 3})));
  w.add_kv("arr.u32", gguf_array(int_array(GgufType::U32, {7, 4294967295})));
  w.add_kv("arr.i32", gguf_array(int_array(GgufType::I32, {-7, 2147483647})));
  w.add_kv("arr.u64", gguf_array(int_array(GgufType::U64, {1ll << 62})));
  w.add_kv("arr.i64", gguf_array(int_array(GgufType::I64, {-(1ll << 62)})));
  w.add_kv("arr.bool", gguf_array(int_array(GgufType::Bool, {1, 0, 1})));
  w.add_kv("arr.f32", gguf_array(float_array(GgufType::F32, {0.25, -2.0})));
  w.add_kv("arr.f64", gguf_array(float_array(GgufType::F64, {1e300, -1e-300})));
  w.add_kv("arr.string", gguf_array(string_array({"a", "", "\xe2\x96\x81token"})));
  w.add_kv("arr.empty", gguf_array(int_array(GgufType::U32, {})));
  w.add_kv("arr.nested",
           gguf_array(nested_array({int_array(GgufType::I32, {1, 2}), int_array(GgufType::I32, {}),
                                    int_array(GgufType::I32, {3})})));
  w.add_kv("arr.nested3", gguf_array(nested_array({nested_array({string_array({"deep"})})})));

  const auto f32 = pattern(3 * 2 * 4, 1);
  w.add_tensor("t.f32", DType::F32, {3, 2}, f32.data(), f32.size());
  const auto q8 = pattern(2 * 34, 2);
  w.add_tensor("t.q8_0", DType::Q8_0, {32, 2}, q8.data(), q8.size());
  const auto f16 = pattern(5 * 2, 3);
  w.add_tensor("t.f16", DType::F16, {5}, f16.data(), f16.size());
  const auto q4k = pattern(144 * 2 * 1 * 1, 4);
  w.add_tensor("t.q4_k.4d", DType::Q4_K, {256, 2, 1, 1}, q4k.data(), q4k.size());
  return w;
}

void expect_every_type(const GgufFile& g, uint32_t version) {
  EXPECT_EQ(g.version(), version);
  EXPECT_EQ(g.alignment(), 64u);
  EXPECT_EQ(g.data_offset() % 64, 0u);
  ASSERT_EQ(g.metadata().size(), 29u);
  EXPECT_EQ(g.metadata()[0].first, "general.alignment");
  EXPECT_EQ(g.metadata()[1].first, "u8");  // file order is kept

  EXPECT_EQ(g.get_int("u8"), 255);
  EXPECT_EQ(g.get_int("i8"), -128);
  EXPECT_EQ(g.get_int("u16"), 65535);
  EXPECT_EQ(g.get_int("i16"), -32768);
  EXPECT_EQ(g.get_int("u32"), 4294967295);
  EXPECT_EQ(g.get_int("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(g.get_float("f32"), 1.5);
  EXPECT_EQ(g.get_bool("bool"), true);
  EXPECT_EQ(g.get_string("string"), "h\xc3\xa9llo, \"world\"\n");
  EXPECT_EQ(g.get_string("empty_string"), "");
  EXPECT_EQ(g.get_int("u64"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(g.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(g.get_float("f64"), M_PI);
  EXPECT_EQ(g.get_float("u32"), 4294967295.0);  // integers read as numbers too
  EXPECT_EQ(g.find("f32")->type, GgufType::F32);
  EXPECT_EQ(g.find("u16")->type, GgufType::U16);
  EXPECT_EQ(g.find("missing"), nullptr);
  EXPECT_EQ(g.get_int("missing"), std::nullopt);

  EXPECT_EQ(g.get_array("arr.u8")->ints, (std::vector<int64_t>{0, 1, 255}));
  EXPECT_EQ(g.get_array("arr.i8")->ints, (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(g.get_array("arr.u16")->ints, (std::vector<int64_t>{65535}));
  EXPECT_EQ(g.get_array("arr.i16")->ints, (std::vector<int64_t>{-2, 3}));
  EXPECT_EQ(g.get_array("arr.u32")->ints, (std::vector<int64_t>{7, 4294967295}));
  EXPECT_EQ(g.get_array("arr.i32")->ints, (std::vector<int64_t>{-7, 2147483647}));
  EXPECT_EQ(g.get_array("arr.u64")->ints, (std::vector<int64_t>{1ll << 62}));
  EXPECT_EQ(g.get_array("arr.i64")->ints, (std::vector<int64_t>{-(1ll << 62)}));
  EXPECT_EQ(g.get_array("arr.bool")->ints, (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(g.get_array("arr.bool")->elem, GgufType::Bool);
  EXPECT_EQ(g.get_array("arr.f32")->floats, (std::vector<double>{0.25, -2.0}));
  EXPECT_EQ(g.get_array("arr.f64")->floats, (std::vector<double>{1e300, -1e-300}));
  EXPECT_EQ(g.get_array("arr.string")->strings,
            (std::vector<std::string>{"a", "", "\xe2\x96\x81token"}));
  EXPECT_EQ(g.get_array("arr.empty")->size(), 0u);
  EXPECT_EQ(g.get_array("arr.empty")->elem, GgufType::U32);

  const GgufArray* nested = g.get_array("arr.nested");
  ASSERT_EQ(nested->elem, GgufType::Array);
  ASSERT_EQ(nested->nested.size(), 3u);
  EXPECT_EQ(nested->nested[0].arr->ints, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nested->nested[1].arr->size(), 0u);
  EXPECT_EQ(nested->nested[2].arr->ints, (std::vector<int64_t>{3}));
  const GgufArray* n3 = g.get_array("arr.nested3");
  ASSERT_EQ(n3->nested.size(), 1u);
  ASSERT_EQ(n3->nested[0].arr->nested.size(), 1u);
  EXPECT_EQ(n3->nested[0].arr->nested[0].arr->strings, (std::vector<std::string>{"deep"}));

  // Wrong-type reads name the key.
  EXPECT_TRUE(test::throws_ts_error([&] { g.get_string("u8"); }, ErrorKind::Model,
                                    "'u8' has type u8, expected string"));
  EXPECT_TRUE(
      test::throws_ts_error([&] { g.get_int("string"); }, ErrorKind::Model, "expected an integer"));
  EXPECT_TRUE(test::throws_ts_error([&] { g.get_bool("u8"); }, ErrorKind::Model, "expected bool"));
  EXPECT_TRUE(
      test::throws_ts_error([&] { g.get_array("f64"); }, ErrorKind::Model, "expected array"));

  ASSERT_EQ(g.tensors().size(), 4u);
  struct Want {
    const char* name;
    DType dtype;
    std::vector<uint64_t> dims;
    size_t nbytes;
    uint8_t seed;
  };
  const Want want[] = {{"t.f32", DType::F32, {3, 2}, 24, 1},
                       {"t.q8_0", DType::Q8_0, {32, 2}, 68, 2},
                       {"t.f16", DType::F16, {5}, 10, 3},
                       {"t.q4_k.4d", DType::Q4_K, {256, 2, 1, 1}, 288, 4}};
  for (const Want& w : want) {
    const GgufTensor* t = g.tensor(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->dtype, w.dtype) << w.name;
    EXPECT_EQ(t->dims, w.dims) << w.name;
    EXPECT_EQ(t->nbytes, w.nbytes) << w.name;
    EXPECT_EQ(t->offset % 64, 0u) << w.name;
    EXPECT_GE(t->offset, g.data_offset()) << w.name;
    const auto expected = pattern(w.nbytes, w.seed);
    EXPECT_EQ(std::memcmp(g.tensor_data(*t), expected.data(), w.nbytes), 0) << w.name;
  }
  EXPECT_EQ(g.tensor("t.f32")->elements(), 6u);
  EXPECT_EQ(g.tensor("absent"), nullptr);
}

TEST(GgufReader, RoundTripEveryTypeV3) {
  test::TempDir dir;
  every_type_writer(3).write(dir.file("m.gguf"));
  expect_every_type(*GgufFile::open(dir.file("m.gguf")), 3);
}

TEST(GgufReader, RoundTripEveryTypeV2) {
  test::TempDir dir;
  every_type_writer(2).write(dir.file("m.gguf"));
  expect_every_type(*GgufFile::open(dir.file("m.gguf")), 2);
}

TEST(GgufReader, LayoutReportedByWriterMatchesReader) {
  test::TempDir dir;
  GgufLayout layout;
  const auto bytes = every_type_writer(3).bytes(&layout);
  test::write_file(dir.file("m.gguf"), bytes);
  const auto g = GgufFile::open(dir.file("m.gguf"));
  EXPECT_EQ(g->data_offset(), layout.data_begin);
  EXPECT_EQ(layout.end, bytes.size());
  EXPECT_EQ(layout.kv_offsets.size(), 29u);
  EXPECT_EQ(layout.kv_offsets[0], 24u);
  EXPECT_EQ(layout.tensor_info_offsets.size(), 4u);
}

TEST(GgufReader, EmptyFileWithoutTensorsOrMetadata) {
  test::TempDir dir;
  GgufWriter().write(dir.file("m.gguf"));
  const auto g = GgufFile::open(dir.file("m.gguf"));
  EXPECT_EQ(g->metadata().size(), 0u);
  EXPECT_EQ(g->tensors().size(), 0u);
  EXPECT_EQ(g->alignment(), 32u);
}

TEST(GgufReader, WriterRefusesWrongTensorSize) {
  GgufWriter w;
  const float data[5] = {};
  EXPECT_TRUE(test::throws_ts_error(
      [&] {
        w.add_tensor("x", DType::F32, {2, 3}, data, sizeof data);
      },
      ErrorKind::Usage, "tensor 'x' is given 20 bytes, its dims and dtype need 24"));
}

std::vector<std::string> gguf_files_under(const std::string& dir, bool recursive,
                                          const std::string& prefix) {
  std::vector<std::string> out;
  if (dir.empty()) return out;
  auto consider = [&](const fs::directory_entry& e) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ".gguf" && name.rfind(prefix, 0) == 0)
      out.push_back(e.path().string());
  };
  if (recursive) {
    for (const auto& e : fs::recursive_directory_iterator(dir)) consider(e);
  } else {
    for (const auto& e : fs::directory_iterator(dir)) consider(e);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Structural checks any well-formed model file passes: ranges inside the file, disjoint,
// aligned, sizes from dims x dtype.
void expect_sound(const GgufFile& g) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const GgufTensor& t : g.tensors()) {
    EXPECT_LE(t.offset + t.nbytes, g.file().size()) << t.name;
    EXPECT_EQ((t.offset - g.data_offset()) % g.alignment(), 0u) << t.name;
    EXPECT_EQ(t.nbytes, row_bytes(t.dtype, t.dims[0], t.name) * (t.elements() / t.dims[0]))
        << t.name;
    ranges.emplace_back(t.offset, t.offset + t.nbytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k) EXPECT_LE(ranges[k - 1].second, ranges[k].first);
}

TEST(GgufReader, EveryFixtureModelOpens) {
  const std::string fixtures = test::shared_path("fixtures");
  TS_REQUIRE_SHARED(fixtures);
  std::vector<std::string> files;
  for (const auto& d : fs::directory_iterator(fixtures))
    if (d.is_directory())
      for (const std::string& f : gguf_files_under(d.path().string(), false, "model-"))
        files.push_back(f);
  ASSERT_GE(files.size(), 12u);  // 10 families, two of them also in f16
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const auto g = GgufFile::open(path);
    EXPECT_EQ(g->version(), 3u);
    EXPECT_TRUE(g->get_string("general.architecture").has_value());
    ASSERT_NE(g->tensor("token_embd.weight"), nullptr);
    EXPECT_EQ(g->tensor("token_embd.weight")->dims[1], 4096u);  // every fixture has vocab 4096
    EXPECT_EQ(g->get_array("tokenizer.ggml.tokens")->strings.size(), 4096u);
    expect_sound(*g);
  }
}

TEST(GgufReader, EveryTinyMoeFileOpens) {
  const std::string dir = test::shared_path("models/tiny-moe");
  TS_REQUIRE_SHARED(dir);
  const auto files = gguf_files_under(dir, true, "");
  ASSERT_GE(files.size(), 6u);
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const auto g = GgufFile::open(path);
    expect_sound(*g);
    // llama.cpp's importance matrix beside the quants is a GGUF of another kind: no model.
    if (g->get_string("general.type") == "imatrix") continue;
    EXPECT_EQ(g->get_string("general.architecture"), "llama");
    EXPECT_GT(g->get_int("llama.expert_count").value_or(0), 0);
    EXPECT_NE(g->tensor("blk.0.ffn_gate_exps.weight"), nullptr);
  }
}

TEST(GgufReader, EveryVocabFileOpens) {
  const std::string dir = test::shared_path("fixtures/vocab");
  TS_REQUIRE_SHARED(dir);
  const std::map<std::string, size_t> n_tokens = {
      {"baichuan", 64000}, {"bert-bge", 30522}, {"deepseek-coder", 32256}, {"deepseek-llm", 102400},
      {"falcon", 65024},   {"gpt-2", 50257},    {"gpt-neox", 50432},       {"llama-spm", 32000},
      {"mpt", 50432},      {"phi-3", 32064},    {"refact", 49216},         {"starcoder", 49152}};
  const auto files = gguf_files_under(dir, false, "ggml-vocab-");
  ASSERT_EQ(files.size(), n_tokens.size());
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const auto g = GgufFile::open(path);
    EXPECT_EQ(g->tensors().size(), 0u);
    const std::string stem = fs::path(path).stem().string().substr(std::strlen("ggml-vocab-"));
    ASSERT_TRUE(n_tokens.count(stem));
    EXPECT_EQ(g->get_array("tokenizer.ggml.tokens")->strings.size(), n_tokens.at(stem));
  }
}

TEST(HfReader, EveryFixtureDirectoryOpensAndAgreesWithItsGguf) {
  const std::string fixtures = test::shared_path("fixtures");
  TS_REQUIRE_SHARED(fixtures);
  int checked = 0;
  for (const auto& d : fs::directory_iterator(fixtures)) {
    const std::string hf_dir = d.path().string() + "/hf";
    if (!fs::is_directory(hf_dir)) continue;
    SCOPED_TRACE(hf_dir);
    const auto hf = HfDirectory::open(hf_dir);
    EXPECT_TRUE(hf->config().contains("architectures"));
    ASSERT_EQ(hf->shards().size(), 1u);
    EXPECT_EQ(hf->shards()[0]->metadata().at("format"), "pt");
    // Multimodal checkpoints keep the text model under model.language_model.
    auto found = hf->find("model.embed_tokens.weight");
    if (found.tensor == nullptr) found = hf->find("model.language_model.embed_tokens.weight");
    ASSERT_NE(found.tensor, nullptr);
    EXPECT_EQ(found.tensor->dtype, DType::F32);

    // The converter copies the f32 embedding unchanged: same GGML-order dims, same bytes. (An
    // MXFP4 checkpoint's GGUF is model-mxfp4.gguf, its embedding f32 as well.)
    std::string gguf = d.path().string() + "/model-f32.gguf";
    if (!fs::exists(gguf)) gguf = d.path().string() + "/model-mxfp4.gguf";
    const auto g = GgufFile::open(gguf);
    const GgufTensor* emb = g->tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(found.tensor->dims, emb->dims);
    ASSERT_EQ(found.tensor->nbytes, emb->nbytes);
    EXPECT_EQ(
        std::memcmp(found.file->tensor_data(*found.tensor), g->tensor_data(*emb), emb->nbytes), 0);
    ++checked;
  }
  EXPECT_EQ(checked, 18);  // the fixture folders of shared/fixtures/README.md (two waves)
}

}  // namespace
}  // namespace ts
