// llama.cpp's tokenizer test vectors (ggml-vocab-*.gguf + .inp/.out): every test string must
// encode (no BOS, special tokens not parsed) to exactly the expected ids, and decode back.
// The llama-spm vocabulary and all vectors are in tests/fixtures/vocab; the other vocab GGUFs
// are read from the shared data and skipped when it is absent.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "formats/gguf.h"
#include "test_paths.h"
#include "text/tokenizer.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<VocabCase> read_cases(const std::string& inp, const std::string& out) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  const std::string raw = read_file(inp);
  std::vector<std::string> texts;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(raw.substr(pos));
      break;
    }
    texts.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream lines(read_file(out));
  std::vector<VocabCase> cases;
  for (const std::string& t : texts) {
    std::string line;
    std::getline(lines, line);
    std::istringstream nums(line);
    VocabCase c{t, {}};
    int32_t id;
    while (nums >> id) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string vocab_gguf(const std::string& name) {
  const std::string local = ts::test::fixtures_dir() + "/vocab/ggml-vocab-" + name + ".gguf";
  if (ts::test::file_exists(local)) return local;
  return ts::test::shared_path("fixtures/vocab/ggml-vocab-" + name + ".gguf");
}

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, EncodeMatchesAndDecodesBack) {
  const std::string name = GetParam();
  const std::string gguf = vocab_gguf(name);
  TS_REQUIRE_SHARED(gguf);
  const std::string base = ts::test::fixtures_dir() + "/vocab/ggml-vocab-" + name + ".gguf";
  const auto cases = read_cases(base + ".inp", base + ".out");
  ASSERT_EQ(cases.size(), 46u);
  const auto file = ts::GgufFile::open(gguf);
  const ts::Tokenizer tok = ts::Tokenizer::from_gguf(*file);
  int failures = 0;
  for (const VocabCase& c : cases) {
    const std::vector<int32_t> got = tok.encode(c.text, false, false);
    EXPECT_EQ(got, c.ids) << name << ": text '" << c.text << "'";
    failures += got != c.ids;
    EXPECT_EQ(tok.decode(c.ids), c.text) << name << ": decode of '" << c.text << "'";
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(All, VocabVectors,
                         ::testing::Values("llama-spm", "phi-3", "deepseek-coder", "deepseek-llm",
                                           "falcon", "gpt-2", "mpt", "refact", "starcoder"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// BGE's WordPiece vocabulary (30522 tokens, lowercasing): its ids are HF's; the text does not
// decode back (the case and accents are gone, punctuation is spaced).
TEST(VocabVectors, BertWordPieceEncodes) {
  const std::string gguf = ts::test::shared_path("fixtures/vocab/ggml-vocab-bert-bge.gguf");
  TS_REQUIRE_SHARED(gguf);
  const auto cases = read_cases(gguf + ".inp", gguf + ".out");
  ASSERT_EQ(cases.size(), 46u);
  const ts::Tokenizer tok = ts::Tokenizer::from_gguf(*ts::GgufFile::open(gguf));
  EXPECT_EQ(tok.kind(), ts::TokenizerKind::WordPiece);
  for (const VocabCase& c : cases)
    EXPECT_EQ(tok.encode(c.text, false, false), c.ids) << "bert-bge: text '" << c.text << "'";
}

}  // namespace
