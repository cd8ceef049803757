// The fuzzers' harness without libFuzzer: every seed in fuzz/corpus/ (and, when the shared data is
// present, every real fixture file) plus a few thousand deterministic mutations of them go through
// the GGUF, safetensors and HF-index parsers, the tokenizer loaders, the server's request
// reader and the tool-call formats. Each input must be refused with a one-line ts::Error or
// accepted with every byte range inside the file; a crash here (or under the ASan build) is a
// parser bug. The libFuzzer targets themselves are built by scripts/fuzz.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../../fuzz/api_request_harness.h"
#include "../../fuzz/chat_template_harness.h"
#include "../../fuzz/http_request_harness.h"
#include "../../fuzz/json_prefix_harness.h"
#include "../../fuzz/json_schema_harness.h"
#include "../../fuzz/model_harness.h"
#include "../../fuzz/parser_harness.h"
#include "../../fuzz/tokenizer_harness.h"
#include "../../fuzz/tool_calls_harness.h"
#include "fixture_models.h"
#include "test_paths.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

Bytes read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// A few libFuzzer-style mutations: bit flips, interesting bytes and integers (counts, lengths and
// offsets are where parsers break), truncation, deletion, duplication and random insertion. Only
// the first `window` bytes are touched, so that large real files are mutated in their headers.
class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  Bytes mutate(Bytes b, size_t window) {
    const int n = 1 + static_cast<int>(pick(4));
    for (int k = 0; k < n; ++k) mutate_once(b, std::min(window, b.size()));
    return b;
  }

 private:
  uint64_t pick(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  void mutate_once(Bytes& b, size_t window) {
    static constexpr uint8_t kBytes[] = {0,   1,   0x7f, 0x80, 0xff, '{', '}',
                                         '[', ']', '"',  ':',  ',',  '-', '9'};
    static constexpr uint64_t kInts[] = {0,          1,          2,          3,          31,
                                         32,         255,        65536,      0x7fffffff, 0xffffffff,
                                         1ull << 32, 1ull << 40, 1ull << 60, 1ull << 63, ~0ull};
    const size_t at = pick(window);
    switch (pick(7)) {
      case 0:
        if (window > 0) b[at] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      case 1:
        if (window > 0) b[at] = kBytes[pick(std::size(kBytes))];
        break;
      case 2: {
        const size_t width = pick(2) ? 8 : 4;
        const uint64_t v = pick(4) == 0 ? b.size() : kInts[pick(std::size(kInts))];
        if (at + width <= b.size()) std::memcpy(b.data() + at, &v, width);
        break;
      }
      case 3:
        b.resize(pick(b.size() + 1));
        break;
      case 4:
        if (window > 0) b.erase(b.begin() + at, b.begin() + std::min(b.size(), at + 1 + pick(64)));
        break;
      case 5:
        if (window > 0) {
          const Bytes chunk(b.begin() + at, b.begin() + std::min(b.size(), at + 1 + pick(64)));
          b.insert(b.begin() + pick(window + 1), chunk.begin(), chunk.end());
        }
        break;
      default: {
        Bytes junk(1 + pick(16));
        for (uint8_t& c : junk) c = static_cast<uint8_t>(rng_());
        b.insert(b.begin() + pick(window + 1), junk.begin(), junk.end());
      }
    }
  }

  std::mt19937_64 rng_;
};

struct Tally {
  int accepted = 0;
  int refused = 0;
};

// Feeds every seed and `total` mutations (spread over the seeds) to `check`.
template <typename Check>
Tally replay(const std::vector<fs::path>& seeds, int total, const Check& check) {
  Tally tally;
  auto run = [&](const Bytes& input, const std::string& what) {
    try {
      (check(input) ? tally.accepted : tally.refused)++;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": escaped as a non-ts::Error exception: " << e.what();
    }
  };
  const int per_seed = seeds.empty() ? 0 : std::max(1, total / static_cast<int>(seeds.size()));
  for (size_t s = 0; s < seeds.size(); ++s) {
    const Bytes seed = read_file(seeds[s]);
    run(seed, seeds[s].string());
    Mutator m(0x5eed0000 + s);
    for (int k = 0; k < per_seed; ++k)
      run(m.mutate(seed, 65536), seeds[s].string() + " mutation " + std::to_string(k));
  }
  return tally;
}

std::vector<fs::path> corpus(const std::string& target) {
  return files_in(fs::path(test::repo_dir()) / "fuzz" / "corpus" / target);
}

// The real files, when the shared data is here: their headers are larger and more varied.
std::vector<fs::path> shared_files(const std::string& pattern_dir, const std::string& ext) {
  std::vector<fs::path> out;
  const std::string fixtures = test::shared_path("fixtures");
  if (fixtures.empty()) return out;
  for (const auto& e : fs::directory_iterator(fixtures)) {
    if (!e.is_directory()) continue;
    for (const fs::path& f : files_in(e.path() / pattern_dir))
      if (f.extension() == ext) out.push_back(f);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FuzzReplay, Gguf) {
  const auto seeds = corpus("gguf");
  ASSERT_GE(seeds.size(), 4u) << "fuzz/corpus/gguf is missing";
  fuzz::InputFile input;
  auto check = [&](const Bytes& b) {
    input.set(b.data(), b.size());
    return fuzz::check_gguf(input.path());
  };
  const Tally t = replay(seeds, 4000, check);
  const auto real_files = shared_files("", ".gguf");
  const Tally real = replay(real_files, 200, check);
  EXPECT_GE(real.accepted, static_cast<int>(real_files.size()));  // each unmutated file opens
  // Both paths are exercised: mutations that keep a file valid and ones that break it.
  EXPECT_GT(t.accepted, static_cast<int>(seeds.size()));
  EXPECT_GT(t.refused, 1000);
}

// The same seeds as the first part of a split model of two (fuzz::SplitInput): the split seeds
// open whole, the rest are refused or open alone, and mutations of the split keys are refused
// with one line naming them.
TEST(FuzzReplay, GgufSplit) {
  const auto seeds = corpus("gguf");
  fuzz::SplitInput input;
  auto check = [&](const Bytes& b) {
    input.set(b.data(), b.size());
    return fuzz::check_gguf(input.path());
  };
  std::vector<fs::path> split_seeds;
  for (const fs::path& p : seeds)
    if (p.filename().string().rfind("split-", 0) == 0) split_seeds.push_back(p);
  ASSERT_FALSE(split_seeds.empty()) << "fuzz/corpus/gguf/split-*.gguf is missing";
  for (const fs::path& p : split_seeds) {
    const Bytes b = read_file(p);
    input.set(b.data(), b.size());
    EXPECT_EQ(GgufFile::open(input.path())->part_count(), 2u) << p;
  }
  const Tally t = replay(split_seeds, 2000, check);
  EXPECT_GT(t.accepted, 0);
  EXPECT_GT(t.refused, 500);
}

// The configuration readers behind the GGUF parser, through the hybrid families' new fields
// (DeltaNet sizes, the layer pattern) and the rest: each fixture model opens, and the mutations of
// its header are refused with one line or open with every tensor inside the file.
TEST(FuzzReplay, ModelConfig) {
  std::vector<fs::path> seeds;
  // Those found: in the shared data, or the repo's copies (qwen3_5, qwen3_moe, gemma3).
  for (const char* name : {"qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_moe", "gemma3"})
    if (const std::string f = test::fixture_file(name, "model-f32.gguf"); !f.empty())
      seeds.push_back(f);
  fuzz::InputFile input;
  auto check = [&](const Bytes& b) {
    input.set(b.data(), b.size());
    return fuzz::check_model(input.path());
  };
  const Tally t = replay(seeds, 1500, check);
  EXPECT_GT(t.accepted, static_cast<int>(seeds.size()));
  EXPECT_GT(t.refused, 300);
}

TEST(FuzzReplay, Safetensors) {
  const auto seeds = corpus("safetensors");
  ASSERT_GE(seeds.size(), 2u) << "fuzz/corpus/safetensors is missing";
  fuzz::InputFile input;
  auto check = [&](const Bytes& b) {
    input.set(b.data(), b.size());
    return fuzz::check_safetensors(input.path());
  };
  const Tally t = replay(seeds, 4000, check);
  const auto real_files = shared_files("hf", ".safetensors");
  const Tally real = replay(real_files, 200, check);
  EXPECT_GE(real.accepted, static_cast<int>(real_files.size()));  // each unmutated file opens
  EXPECT_GT(t.accepted, static_cast<int>(seeds.size()));
  EXPECT_GT(t.refused, 1000);
}

TEST(FuzzReplay, HfIndex) {
  const auto seeds = corpus("hf_index");
  ASSERT_GE(seeds.size(), 1u) << "fuzz/corpus/hf_index is missing";
  fuzz::HfScratchDir dir;
  auto check = [&](const Bytes& b) {
    dir.set_index(b.data(), b.size());
    return fuzz::check_hf_dir(dir.dir());
  };
  const Tally t = replay(seeds, 1000, check);
  EXPECT_GT(t.accepted, static_cast<int>(seeds.size()));
  EXPECT_GT(t.refused, 300);
}

// Tokenizer loaders: the seeds (and the shared tokenizer.model / tokenizer.json) open, and their
// mutations are refused with a one-line error or give a tokenizer that encodes and decodes.
void replay_tokenizer(const std::string& target, const std::string& file,
                      const std::vector<fs::path>& real_files, int mutations) {
  const auto seeds = corpus(target);
  ASSERT_GE(seeds.size(), 2u) << "fuzz/corpus/" << target << " is missing";
  fuzz::ScratchDir dir;
  auto check = [&](const Bytes& b) {
    dir.write(file, b.data(), b.size());
    return fuzz::check_tokenizer(dir.dir());
  };
  const Tally t = replay(seeds, mutations, check);
  EXPECT_GT(t.accepted, static_cast<int>(seeds.size())) << target;
  EXPECT_GT(t.refused, mutations / 10) << target;
  const Tally real = replay(real_files, 50, check);
  EXPECT_GE(real.accepted, static_cast<int>(real_files.size())) << target;
}

std::vector<fs::path> shared_tokenizer(const std::string& name) {
  const std::string path = test::shared_path("fixtures/tokenizer/" + name);
  return path.empty() ? std::vector<fs::path>{} : std::vector<fs::path>{path};
}

TEST(FuzzReplay, SpmTokenizer) {
  replay_tokenizer("spm_tokenizer", "tokenizer.model", shared_tokenizer("tokenizer.model"), 600);
}

TEST(FuzzReplay, HfTokenizer) {
  replay_tokenizer("hf_tokenizer", "tokenizer.json", {}, 1000);
}

TEST(FuzzReplay, ApiRequest) {
  const auto seeds = corpus("api_request");
  ASSERT_GE(seeds.size(), 4u) << "fuzz/corpus/api_request is missing";
  const auto check = [](const Bytes& b) { return fuzz::check_api_request(b.data(), b.size()); };
  const Tally t = replay(seeds, 2000, check);
  EXPECT_GT(t.accepted, static_cast<int>(seeds.size()));
  EXPECT_GT(t.refused, 200);
}

// Whole HTTP requests: heads judged as the gate judges them, bodies as the server reads them.
TEST(FuzzReplay, HttpRequest) {
  const auto seeds = corpus("http_request");
  ASSERT_GE(seeds.size(), 4u) << "fuzz/corpus/http_request is missing";
  const auto check = [](const Bytes& b) { return fuzz::check_http_request(b.data(), b.size()); };
  const Tally t = replay(seeds, 2000, check);
  EXPECT_GT(t.accepted, 2);
  EXPECT_GT(t.refused, 200);
}

// JSON mode's recognizer: objects, cut objects and their mutations agree with nlohmann's parser,
// and whatever prefix is accepted completes to an object.
TEST(FuzzReplay, JsonPrefix) {
  const auto seeds = corpus("json_prefix");
  ASSERT_GE(seeds.size(), 4u) << "fuzz/corpus/json_prefix is missing";
  const auto check = [](const Bytes& b) { return fuzz::check_json_prefix(b.data(), b.size()); };
  const Tally t = replay(seeds, 3000, check);
  EXPECT_GT(t.accepted, 2);
  EXPECT_GT(t.refused, 300);
}

// JSON schemas: seeds (a schema, NUL, a document) and their mutations compile or are refused
// with a ts::Error; what SchemaPrefix accepts, and any greedy completion of it, satisfies the
// schema by an independent validator.
TEST(FuzzReplay, JsonSchema) {
  const auto seeds = corpus("json_schema");
  ASSERT_GE(seeds.size(), 4u) << "fuzz/corpus/json_schema is missing";
  const auto check = [](const Bytes& b) { return fuzz::check_json_schema(b.data(), b.size()); };
  const Tally t = replay(seeds, 3000, check);
  EXPECT_GT(t.accepted, static_cast<int>(seeds.size()));
  EXPECT_GT(t.refused, 300);
}

// Tool calls: model output in each family's format, and its mutations, read without throwing into
// valid calls; what each envelope accepts completes to calls within their schemas.
TEST(FuzzReplay, ToolCalls) {
  const auto seeds = corpus("tool_calls");
  ASSERT_GE(seeds.size(), 8u) << "fuzz/corpus/tool_calls is missing";
  const auto check = [](const Bytes& b) { return fuzz::check_tool_calls(b.data(), b.size()); };
  const Tally t = replay(seeds, 4000, check);
  EXPECT_GE(t.accepted, static_cast<int>(seeds.size()));
  EXPECT_GT(t.refused, 100);
}

// Chat templates: the seeds, every real template of tests/fixtures/chat_templates, and their
// mutations parse or are refused, render or fail, each with a one-line error and within limits.
TEST(FuzzReplay, ChatTemplate) {
  auto seeds = corpus("chat_template");
  ASSERT_GE(seeds.size(), 4u) << "fuzz/corpus/chat_template is missing";
  for (const fs::path& f : files_in(fs::path(test::fixtures_dir()) / "chat_templates"))
    if (f.extension() == ".jinja") seeds.push_back(f);
  const Tally t = replay(
      seeds, 3000, [](const Bytes& b) { return fuzz::check_chat_template(b.data(), b.size()); });
  EXPECT_GT(t.accepted, static_cast<int>(seeds.size()) / 2);
  EXPECT_GT(t.refused, 500);
}

}  // namespace
}  // namespace ts
