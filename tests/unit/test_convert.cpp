// `turbospark convert`: each family fixture's HF directory converted with --type f32 is the GGUF
// llama.cpp's converter made of it (the same keys and values, tensor names, shapes, types and
// bytes; the few differences listed with their reasons), and runs to the HF directory's logits;
// f16, bf16 and q8_0 are the converter's files too; `convert --mmproj` of the vision fixtures is
// the converter's mmproj and runs their images to the reference logits; the multimodal classes'
// text decoders and BERT are the converter's files; `quantize` of the directory is `quantize` of
// the converted file; bad input is refused with one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fixture_models.h"
#include "formats/gguf.h"
#include "test_paths.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

struct Family {
  const char* fixture;
  // Keys whose value differs from the fixture's GGUF, and its tensors the HF directory lacks.
  std::set<std::string> keys_differing;
  const char* missing_tensor_prefix = nullptr;
  const char* gguf = "model-f32.gguf";  // the converter's file
};

// glm4_moe: the fixture's GGUF was converted from the whole checkpoint (its directory named
// "full", an MTP layer included); hf/ is that checkpoint without the MTP layer's tensors, so the
// name, the size label and blk.2 (the MTP layer) differ.
// qwen3_next's GGUF was made by an older converter, which wrote no attention.recurrent_layers
// (the vendored one writes it from layer_types, as convert does).
const Family kFamilies[] = {
    {"llama", {}},
    {"llama_rope_llama3", {}},
    {"mistral", {}},
    {"mixtral", {}},
    {"qwen2", {}},
    {"qwen3", {}},
    {"qwen3_moe", {}},
    {"gemma3", {}},
    {"gemma4", {}},
    {"gemma4_moe", {}},
    {"minimax_m2", {}},
    {"qwen3_vl", {}},
    {"qwen3_vl_moe", {}},
    {"gpt_oss", {}},
    {"gpt_oss_mxfp4", {}, nullptr, "model-mxfp4.gguf"},
    {"deepseek_v3", {}},
    {"qwen3_next", {"qwen3next.attention.recurrent_layers"}},
    {"qwen3_5", {}},
    {"qwen3_5_moe", {}},
    {"glm4_moe", {"general.name", "general.size_label"}, "blk.2."},
    {"qwen3_embedding", {}},
};

std::string hf_dir(const std::string& fixture) {
  const std::string config = test::fixture_file(fixture, "hf/config.json");
  return config.empty() ? "" : fs::path(config).parent_path().string();
}

int convert(const std::string& in, const std::string& out, const std::string& type,
            std::string* log = nullptr) {
  return test::run_command(test::binary_path() + " convert " + in + " " + out + " --type " + type,
                           log);
}

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  if (a.type == GgufType::String) return a.s == b.s;
  if (a.type == GgufType::F32 || a.type == GgufType::F64) return a.f == b.f;
  if (a.type != GgufType::Array) return a.i == b.i;
  const GgufArray &x = *a.arr, &y = *b.arr;
  if (x.elem != y.elem || x.ints != y.ints || x.floats != y.floats || x.strings != y.strings ||
      x.nested.size() != y.nested.size())
    return false;
  for (size_t i = 0; i < x.nested.size(); ++i)
    if (!same_value(x.nested[i], y.nested[i])) return false;
  return true;
}

// `got` has `want`'s keys with equal values and its tensors with equal names, shapes, types and
// bytes, but for the keys in `differing` and the tensors named from `missing_prefix`, which the
// HF directory lacks.
void expect_same_gguf(const std::string& what, const GgufFile& got, const GgufFile& want,
                      const std::set<std::string>& differing, const char* missing_prefix) {
  std::set<std::string> keys;
  for (const auto& [key, value] : want.metadata()) {
    keys.insert(key);
    if (differing.count(key)) continue;
    const GgufValue* g = got.find(key);
    if (g == nullptr) {
      ADD_FAILURE() << what << ": missing key " << key;
    } else {
      EXPECT_TRUE(same_value(*g, value)) << what << ": key " << key << " differs";
    }
  }
  for (const auto& [key, value] : got.metadata())
    if (!keys.count(key) && !differing.count(key))
      ADD_FAILURE() << what << ": key " << key << " is not in the converter's file";

  size_t compared = 0;
  for (const GgufTensor& w : want.tensors()) {
    const GgufTensor* g = got.tensor(w.name);
    if (missing_prefix != nullptr && w.name.starts_with(missing_prefix)) {
      EXPECT_EQ(g, nullptr) << w.name;
      continue;
    }
    ASSERT_NE(g, nullptr) << what << ": missing tensor " << w.name;
    EXPECT_EQ(g->dims, w.dims) << w.name;
    EXPECT_EQ(g->dtype, w.dtype) << w.name;
    ASSERT_EQ(g->nbytes, w.nbytes) << w.name;
    EXPECT_EQ(std::memcmp(got.tensor_data(*g), want.tensor_data(w), w.nbytes), 0)
        << what << ": tensor " << w.name << " differs";
    ++compared;
  }
  EXPECT_EQ(got.tensors().size(), compared) << what << ": tensors the converter did not write";
  // In the converter's order too.
  const auto order = [](const auto& items, const auto& name_of, const auto& keep) {
    std::vector<std::string> names;
    for (const auto& x : items)
      if (keep(name_of(x))) names.push_back(name_of(x));
    return names;
  };
  const auto key_of = [](const auto& kv) { return kv.first; };
  const auto tensor_of = [](const GgufTensor& t) { return t.name; };
  const auto in_got_keys = [&](const std::string& k) { return got.find(k) != nullptr; };
  const auto in_want_keys = [&](const std::string& k) { return want.find(k) != nullptr; };
  const auto in_got = [&](const std::string& n) { return got.tensor(n) != nullptr; };
  EXPECT_EQ(order(got.metadata(), key_of, in_want_keys),
            order(want.metadata(), key_of, in_got_keys))
      << what << ": keys in another order";
  EXPECT_EQ(order(got.tensors(), tensor_of, in_got), order(want.tensors(), tensor_of, in_got))
      << what << ": tensors in another order";
}

class ConvertFamily : public testing::TestWithParam<Family> {};

TEST_P(ConvertFamily, IsTheConvertersGgufAndRunsToTheDirectorysLogits) {
  const Family& f = GetParam();
  const std::string hf = hf_dir(f.fixture);
  const std::string ref = test::fixture_file(f.fixture, f.gguf);
  if (hf.empty() || ref.empty()) GTEST_SKIP() << f.fixture << ": no hf/ or " << f.gguf;
  const std::string out = test::scratch_path(std::string(f.fixture) + ".gguf");
  std::string log;
  ASSERT_EQ(convert(hf, out, "f32", &log), 0) << log;
  const auto got = GgufFile::open(out);
  const auto want = GgufFile::open(ref);

  expect_same_gguf(f.fixture, *got, *want, f.keys_differing, f.missing_tensor_prefix);

  // Ids under every fixture's vocabulary (glm4_moe's has 64).
  const std::vector<int32_t> ids = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61};
  const std::vector<float> from_file = test::run_logits(out, ids, {});
  const std::vector<float> from_dir = test::run_logits(hf, ids, {});
  const auto vocab = static_cast<int64_t>(from_dir.size() / ids.size());
  const auto c = test::compare_logits(from_file, from_dir, vocab);
  EXPECT_LE(c.rel, 1e-4) << f.fixture << ": " << c.summary();
  EXPECT_EQ(c.argmax_mismatches, 0) << f.fixture << ": " << c.summary();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ConvertFamily, testing::ValuesIn(kFamilies),
                         [](const testing::TestParamInfo<Family>& i) {
                           return std::string(i.param.fixture);
                         });

// f16, bf16 and q8_0 as the converter writes them (tests/tools/make_convert_refs.py), byte for
// byte; each runs (f16 to the fixtures' bound for f16 files).
TEST(Convert, OtherTypesAreTheConvertersFiles) {
  const std::string dir = test::fixtures_dir() + "/models/glm4_moe";
  const std::string f32 = test::scratch_path("f32.gguf");
  ASSERT_EQ(convert(dir + "/hf", f32, "f32"), 0);
  const std::vector<int32_t> ids = {2, 60, 45, 35, 39, 27, 21, 29};
  const std::vector<float> base = test::run_logits(f32, ids, {});
  for (const char* type : {"f16", "bf16", "q8_0"}) {
    const std::string out = test::scratch_path(std::string(type) + ".gguf");
    std::string log;
    ASSERT_EQ(convert(dir + "/hf", out, type, &log), 0) << log;
    expect_same_gguf(type, *GgufFile::open(out),
                     *GgufFile::open(dir + "/convert-" + type + ".gguf"), {}, nullptr);
    const std::vector<float> logits = test::run_logits(out, ids, {});
    ASSERT_EQ(logits.size(), base.size());
    EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }))
        << type;
    if (std::string(type) == "f16") {
      EXPECT_LE(test::max_rel_error(logits, base), 5e-3);
    }
  }
}

// The vision fixtures: `convert --mmproj` is llama.cpp's --mmproj file at f32 (made by the
// fixture's script) and f16 (tools/reference/make_convert_vision_refs.py), and the converted tower
// runs the prompt with two images to the HF reference's logits.
struct MmprojFixture {
  const char* fixture;
  int64_t vocab;
  const char* logits_args;  // what `logits` needs beside the mmproj (its processor's bound)
};

class ConvertMmproj : public testing::TestWithParam<MmprojFixture> {};

TEST_P(ConvertMmproj, IsTheConvertersFileAndRunsToTheReferenceLogits) {
  const MmprojFixture& f = GetParam();
  const std::string dir = test::fixtures_dir() + "/models/" + f.fixture;
  for (const char* type : {"f32", "f16"}) {
    const std::string out = test::scratch_path(std::string(f.fixture) + "-" + type + ".gguf");
    std::string log;
    ASSERT_EQ(test::run_command(test::binary_path() + " convert " + dir + "/hf " + out +
                                    " --mmproj --type " + type,
                                &log),
              0)
        << log;
    expect_same_gguf(std::string(f.fixture) + " " + type, *GgufFile::open(out),
                     *GgufFile::open(dir + "/mmproj-" + type + ".gguf"), {}, nullptr);
    if (std::string(type) == "f32") {
      const auto c = test::cli_image_logits(dir, " --mmproj " + out + f.logits_args, f.vocab);
      EXPECT_LE(c.rel, 1e-4) << f.fixture << ": " << c.summary();
      EXPECT_EQ(c.argmax_mismatches, 0) << f.fixture << ": " << c.summary();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ConvertMmproj,
    testing::Values(MmprojFixture{"gemma3_vision", 96, ""},
                    MmprojFixture{"gemma4_vision", 64, " --image-max-tokens 70"}),
    [](const testing::TestParamInfo<MmprojFixture>& i) { return std::string(i.param.fixture); });

// A vision fixture's hf/ (which has no tokenizer) with a text fixture's tokenizer files beside
// it, in a folder named hf as the converter's file was made from; "" without the shared data.
std::string with_tokenizer(const std::string& vision, const std::string& text,
                           const std::vector<std::string>& files) {
  const std::string tokenizer = test::fixture_file(text, "hf/" + files[0]);
  if (tokenizer.empty()) return "";
  const std::string dir = test::fixtures_dir() + "/models/" + vision;
  const std::string hf = test::scratch_path(vision) + "/hf";
  fs::remove_all(hf);
  fs::create_directories(hf);
  for (const char* f : {"config.json", "model.safetensors", "preprocessor_config.json"})
    fs::create_symlink(dir + "/hf/" + f, hf + "/" + f);
  for (const std::string& f : files)
    fs::create_symlink(fs::path(tokenizer).parent_path().string() + "/" + f, hf + "/" + f);
  return hf;
}

// Gemma3ForConditionalGeneration's text decoder is the converter's file. Its logits are not the
// checkpoint's: llama.cpp's gemma3 file has no layer pattern (5 sliding layers of 6, with the
// sliding rope base), and this 2-layer checkpoint's second layer is global.
TEST(Convert, Gemma3MultimodalTextDecoderIsTheConvertersFile) {
  const std::string hf =
      with_tokenizer("gemma3_vision", "gemma3", {"tokenizer.model", "tokenizer_config.json"});
  if (hf.empty()) GTEST_SKIP() << "gemma3: no hf/tokenizer.model";
  const std::string out = test::scratch_path("gemma3cg.gguf");
  std::string log;
  ASSERT_EQ(convert(hf, out, "f32", &log), 0) << log;
  expect_same_gguf("gemma3 text", *GgufFile::open(out),
                   *GgufFile::open(test::fixtures_dir() + "/models/gemma3_vision/text-f32.gguf"),
                   {}, nullptr);
}

// Gemma4ForConditionalGeneration's text decoder is the converter's file (its FNV-1a 64 hash, made
// by tools/reference/make_convert_vision_refs.py) and runs a text prompt to the directory's logits,
// and with llama.cpp's mmproj the image prompt to the reference's (its image rows attend both ways
// on the sliding layers, as llama.cpp reads a GGUF of this width).
TEST(Convert, Gemma4MultimodalTextDecoderIsTheConvertersFile) {
  const std::string hf =
      with_tokenizer("gemma4_vision", "gemma4", {"tokenizer.json", "tokenizer_config.json"});
  if (hf.empty()) GTEST_SKIP() << "gemma4: no hf/tokenizer.json";
  const std::string out = test::scratch_path("gemma4cg.gguf");
  std::string log;
  ASSERT_EQ(convert(hf, out, "f32", &log), 0) << log;
  std::ifstream f(out, std::ios::binary);
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c; f.get(c);) hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  std::ifstream ref(test::fixtures_dir() + "/models/gemma4_vision/text-f32.fnv1a64");
  std::string want;
  ref >> want;
  EXPECT_EQ(hex, want) << "not the converter's file";

  const std::vector<int32_t> ids = {2, 17, 33, 5,  9,  40, 41, 12, 7,
                                    3, 22, 50, 61, 13, 8,  1,  19, 27};
  const auto c =
      test::compare_logits(test::run_logits(out, ids, {}), test::run_logits(hf, ids, {}), 64);
  EXPECT_LE(c.rel, 1e-4) << c.summary();
  EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();

  const std::string dir = test::fixtures_dir() + "/models/gemma4_vision";
  // The text fixture's tokenizer has no image token: the placeholder id is the checkpoint's.
  const auto meta = nlohmann::json::parse(std::ifstream(dir + "/meta.json"));
  const auto im = test::cli_image_logits(
      dir,
      " --mmproj " + dir + "/mmproj-f32.gguf --image-max-tokens 70 --image-token " +
          std::to_string(meta["image"]["image_token_id"].get<int>()),
      64, out);
  EXPECT_LE(im.rel, 1e-4) << im.summary();
  EXPECT_EQ(im.argmax_mismatches, 0) << im.summary();
}

// Qwen3-VL's text model and vision tower both converted run the prompt with an image to the HF
// reference's logits; the mmproj is the converter's (the fixture's mmproj-f32.gguf): the dense
// fixture (shared data) and the MoE one.
class ConvertQwen3Vl : public testing::TestWithParam<std::string> {};

TEST_P(ConvertQwen3Vl, TextAndMmprojRunToTheImageReference) {
  const std::string& fixture = GetParam();
  const std::string hf = hf_dir(fixture);
  const std::string ref = test::fixture_file(fixture, "mmproj-f32.gguf");
  if (hf.empty() || ref.empty()) GTEST_SKIP() << fixture << ": no hf/ or mmproj-f32.gguf";
  const std::string dir = fs::path(ref).parent_path().string();
  const std::string text = test::scratch_path(fixture + ".gguf"),
                    mmproj = test::scratch_path(fixture + "-mmproj.gguf");
  std::string log;
  ASSERT_EQ(convert(hf, text, "f32", &log), 0) << log;
  ASSERT_EQ(
      test::run_command(
          test::binary_path() + " convert " + hf + " " + mmproj + " --mmproj --type f32", &log),
      0)
      << log;
  expect_same_gguf(fixture + " mmproj", *GgufFile::open(mmproj), *GgufFile::open(ref), {}, nullptr);

  const auto meta = nlohmann::json::parse(std::ifstream(dir + "/meta.json"));
  const auto ids = meta["image"]["prompt_ids"].get<std::vector<int32_t>>();
  const std::vector<float> want = test::read_f32_file(dir + "/ref_logits_image.f32");
  const std::string out = test::scratch_path("logits.f32");
  // An mmproj GGUF has no processor bounds: the images are small enough not to be resized.
  ASSERT_EQ(test::run_command(test::binary_path() + " logits -m " + text + " --mmproj " + mmproj +
                                  " --image-token " +
                                  std::to_string(meta["config"]["image_token_id"].get<int>()) +
                                  " --image-min-pixels 64 --image " + dir + "/image.png --tokens " +
                                  test::ids_csv(ids) + " --out " + out + " --kv-type f32 -t 2 2>&1",
                              &log),
            0)
      << log;
  const auto c = test::compare_logits(test::read_f32_file(out), want,
                                      static_cast<int64_t>(want.size() / ids.size()));
  EXPECT_LE(c.rel, 1e-4) << c.summary();
  EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ConvertQwen3Vl, testing::Values("qwen3_vl", "qwen3_vl_moe"),
                         [](const auto& i) { return i.param; });

TEST(Convert, QuantizeOfTheDirectoryIsQuantizeOfTheConvertedFile) {
  const std::string hf = test::fixtures_dir() + "/models/glm4_moe/hf";
  const std::string f32 = test::scratch_path("glm.gguf");
  ASSERT_EQ(convert(hf, f32, "f32"), 0);
  const std::string a = test::scratch_path("from-dir.gguf"),
                    b = test::scratch_path("from-file.gguf");
  std::string log;
  const std::string q = test::binary_path() + " quantize ";
  ASSERT_EQ(test::run_command(q + hf + " " + a + " q8_0 -t 2", &log), 0) << log;
  ASSERT_EQ(test::run_command(q + f32 + " " + b + " q8_0 -t 2", &log), 0) << log;
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  const std::string da((std::istreambuf_iterator<char>(fa)), {});
  const std::string db((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_GT(da.size(), 0u);
  EXPECT_TRUE(da == db) << "quantize of the directory differs from quantize of its conversion";
}

// BertModel (an encoder with a WordPiece vocabulary) is the converter's file at f32 and f16
// (tests/tools/make_convert_refs.py; its position and token-type tables stay f32), and embeds
// text as the directory does.
TEST(Convert, BertIsTheConvertersFileAndEmbedsAsTheDirectory) {
  const std::string dir = test::fixtures_dir() + "/models/bert_embedding";
  const std::string out = test::scratch_path("bert.gguf"), f16 = test::scratch_path("bert16.gguf");
  std::string log;
  ASSERT_EQ(convert(dir + "/hf", out, "f32", &log), 0) << log;
  expect_same_gguf("bert", *GgufFile::open(out), *GgufFile::open(dir + "/model-f32.gguf"), {},
                   nullptr);
  ASSERT_EQ(convert(dir + "/hf", f16, "f16", &log), 0) << log;
  expect_same_gguf("bert f16", *GgufFile::open(f16), *GgufFile::open(dir + "/convert-f16.gguf"), {},
                   nullptr);
  const auto embed = [](const std::string& model) {
    std::string text;
    EXPECT_EQ(test::run_command(test::binary_path() + " embed -m " + model +
                                    " -t 1 'hello world' 'the quick brown fox' 2>&1",
                                &text),
              0)
        << text;
    std::vector<std::vector<float>> rows;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      rows.push_back(nlohmann::json::parse(line).get<std::vector<float>>());
    return rows;
  };
  const auto from_file = embed(out), from_dir = embed(dir + "/hf");
  ASSERT_EQ(from_file.size(), 2u);
  ASSERT_EQ(from_dir.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_GE(test::cosine(from_file[i], from_dir[i]), 0.9999) << i;
}

// A copy of qwen3_embedding's directory (links to its files) with `change` applied.
std::string directory_copy(const std::string& name, const std::vector<std::string>& files,
                           const std::string& architecture = "") {
  const std::string src = test::fixtures_dir() + "/models/qwen3_embedding/hf";
  const std::string dir = test::scratch_path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const std::string& f : files) fs::create_symlink(src + "/" + f, dir + "/" + f);
  std::ifstream in(src + "/config.json");
  std::string config((std::istreambuf_iterator<char>(in)), {});
  if (!architecture.empty()) {
    const size_t at = config.find("Qwen3ForCausalLM");
    config.replace(at, std::strlen("Qwen3ForCausalLM"), architecture);
  }
  std::ofstream(dir + "/config.json") << config;
  return dir;
}

void expect_refused(const std::string& in, const std::string& out, int code,
                    const std::string& what) {
  std::string log;
  EXPECT_EQ(convert(in, out, "f16", &log), code) << log;
  EXPECT_NE(log.find(what), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}

// NomicBertModel in nomic-ai's layout is the converter's file at f32 (its context the 2048
// positions nomic-embed-text was trained on, not the 8192 its config states), which embeds the
// texts as the directory does, bit for bit; a config the converter does not convert (another
// rotary layout, nomic-bert-moe, transformers' own layout) is refused with one line.
// `turbospark embed` of `texts` (shell words) prints the same for the converted file as for the
// directory, bit for bit.
void expect_embeds_as(const std::string& file, const std::string& dir, const std::string& texts) {
  std::string from_file, from_dir;
  const std::string args = " -t 1 " + texts + " 2>&1";
  ASSERT_EQ(test::run_command(test::binary_path() + " embed -m " + file + args, &from_file), 0)
      << from_file;
  ASSERT_EQ(test::run_command(test::binary_path() + " embed -m " + dir + args, &from_dir), 0)
      << from_dir;
  EXPECT_EQ(from_file, from_dir);
}

// XLMRobertaModel: the converter's bert file with the "t5" vocabulary of sentencepiece.bpe.model
// (fairseq's ids, the precompiled charsmap) and the position table without its first
// pad_token_id + 1 rows, byte for byte; it embeds as the directory does, bit for bit.
TEST(Convert, XlmRobertaIsTheConvertersFile) {
  const std::string dir = test::fixtures_dir() + "/models/xlm_roberta";
  const std::string out = test::scratch_path("xlmr.gguf");
  std::string log;
  ASSERT_EQ(convert(dir + "/hf", out, "f32", &log), 0) << log;
  expect_same_gguf("xlm-roberta", *GgufFile::open(out), *GgufFile::open(dir + "/model-f32.gguf"),
                   {}, nullptr);
  std::ifstream fa(out, std::ios::binary), fb(dir + "/model-f32.gguf", std::ios::binary);
  const std::string da((std::istreambuf_iterator<char>(fa)), {});
  const std::string db((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_TRUE(da == db) << "convert's file differs from the converter's byte for byte";
  expect_embeds_as(out, dir + "/hf", "'hello world' 'Zürich ＡＢＣ 東京'");

  const std::string copy = test::scratch_path("xlmr-no-spm");
  fs::remove_all(copy);
  fs::copy(dir + "/hf", copy, fs::copy_options::recursive);
  fs::remove(copy + "/sentencepiece.bpe.model");
  expect_refused(copy, test::scratch_path("xlmr16.gguf"), 2,
                 "an XLM-R tokenizer without sentencepiece.bpe.model is not converted");
}

TEST(Convert, NomicBertIsTheConvertersFile) {
  const std::string dir = test::fixtures_dir() + "/models/nomic_bert";
  const std::string out = test::scratch_path("nomic.gguf");
  std::string log;
  ASSERT_EQ(convert(dir + "/hf", out, "f32", &log), 0) << log;
  expect_same_gguf("nomic-bert", *GgufFile::open(out), *GgufFile::open(dir + "/model-f32.gguf"), {},
                   nullptr);
  expect_embeds_as(out, dir + "/hf", "'hello world' 'the quick brown fox'");

  const auto changed = [&](const std::string& name, const char* key, const nlohmann::json& v) {
    const std::string copy = test::scratch_path(name);
    fs::remove_all(copy);
    fs::copy(dir + "/hf", copy, fs::copy_options::recursive);
    std::ifstream in(copy + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    if (v.is_null()) {
      config.erase(key);
    } else {
      config[key] = v;
    }
    std::ofstream(copy + "/config.json") << config.dump(1);
    return copy;
  };
  const std::string f16 = test::scratch_path("nomic16.gguf");
  expect_refused(changed("nomic-interleaved", "rotary_emb_interleaved", true), f16, 2,
                 "rotary_emb_interleaved is true, which convert does not handle (false)");
  expect_refused(changed("nomic-moe", "moe_every_n_layers", 2), f16, 2,
                 "nomic-bert-moe (moe_every_n_layers) is not converted");
  expect_refused(changed("nomic-positions", "n_positions", 4096), f16, 2,
                 "n_positions 4096 with max_trained_positions 2048 is not a nomic-embed-text");
  expect_refused(changed("nomic-transformers", "n_embd", nullptr), f16, 2,
                 "a NomicBertModel in transformers' layout (no n_embd) is not converted");
}

TEST(Convert, BadInputIsRefusedWithOneLine) {
  const std::string out = test::scratch_path("out.gguf");
  const std::vector<std::string> all = {"model.safetensors", "tokenizer.json",
                                        "tokenizer_config.json"};
  expect_refused(directory_copy("other", all, "FooForCausalLM"), out, 2,
                 "convert does not handle 'FooForCausalLM'");
  expect_refused(directory_copy("notok", {"model.safetensors"}), out, 2,
                 "no tokenizer (tokenizer.model or tokenizer.json)");
  const std::string hf = directory_copy("same", all);
  expect_refused(hf, hf + "/model.gguf", 1, "would be written into the input");
  expect_refused(hf, hf, 1, "would be written into the input");
  expect_refused(hf, test::scratch_path("no-such-dir") + "/x.gguf", 1, "cannot open for writing");
  expect_refused(test::fixtures_dir() + "/models/qwen3_embedding/model-f32.gguf", out, 1,
                 "is not a Hugging Face directory");
  std::string log;
  EXPECT_EQ(
      test::run_command(test::binary_path() + " convert " + hf + " " + out + " --type q4_k", &log),
      1)
      << log;
  EXPECT_NE(log.find("type 'q4_k' is not one of f32, f16, bf16, q8_0"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out)) << "a refused conversion leaves no file";

  // A class without a vision tower convert writes.
  EXPECT_EQ(
      test::run_command(test::binary_path() + " convert " + hf + " " + out + " --mmproj", &log), 2)
      << log;
  EXPECT_NE(log.find("convert --mmproj does not handle 'Qwen3ForCausalLM'"), std::string::npos)
      << log;
}

}  // namespace
}  // namespace ts
