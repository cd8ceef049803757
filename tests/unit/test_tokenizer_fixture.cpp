// The 4096-piece SentencePiece tokenizer of every model fixture, read both as a Hugging Face
// directory (tokenizer.model + tokenizer.json) and from a GGUF: ids must equal the SentencePiece
// library's own (spm_expected.jsonl, made by tests/tools/make_spm_expected.py) and reproduce the
// corpus token stream tiny-moe was evaluated on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "formats/gguf.h"
#include "test_paths.h"
#include "text/detokenizer.h"
#include "text/rng.h"
#include "text/sentencepiece_model.h"
#include "text/tokenizer.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kDir = ts::test::fixtures_dir() + "/tokenizer";

std::string tiny_moe_gguf() {
  return ts::test::shared_path("models/tiny-moe/model-q8_0.gguf");
}

void expect_matches_sentencepiece(const ts::Tokenizer& tok) {
  std::istringstream lines(read_file(kDir + "/spm_expected.jsonl"));
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    const std::string text = j["text"].get<std::string>();
    EXPECT_EQ(tok.encode(text, false, false), j["ids"].get<std::vector<int32_t>>())
        << "text '" << text << "'";
    ++n;
  }
  EXPECT_EQ(n, 51);
}

void expect_fixture_metadata(const ts::Tokenizer& tok) {
  EXPECT_EQ(tok.kind(), ts::TokenizerKind::SentencePiece);
  EXPECT_EQ(tok.vocab_size(), 4096);
  EXPECT_EQ(tok.unk(), 0);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.eot(), -1);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_FALSE(tok.add_eos());
  EXPECT_TRUE(tok.add_space_prefix());
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(1));
  EXPECT_EQ(tok.token_text(3), "<0x00>");
  EXPECT_EQ(tok.token_type(3), ts::TokenType::Byte);
  EXPECT_EQ(tok.token_text(259), "\xE2\x96\x81t");
  EXPECT_EQ(tok.token_to_piece(259), " t");
  EXPECT_EQ(tok.token_to_piece(1), "<s>");
  EXPECT_EQ(tok.token_to_piece(1, false), "");
}

// valid.tokens: for every non-empty line of valid.txt, BOS + ids + EOS (int32 little-endian).
void expect_corpus_stream(const ts::Tokenizer& tok) {
  const std::string txt = ts::test::shared_path("corpus/valid.txt");
  const std::string bin = ts::test::shared_path("corpus/valid.tokens");
  if (txt.empty() || bin.empty()) GTEST_SKIP() << "shared corpus absent";
  const std::string raw = read_file(bin);
  std::vector<int32_t> want(raw.size() / 4);
  std::memcpy(want.data(), raw.data(), want.size() * 4);
  std::vector<int32_t> got;
  std::istringstream lines(read_file(txt));
  std::string line;
  int lines_checked = 0;
  int roundtrip_failures = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const std::vector<int32_t> ids = tok.encode(line, tok.add_bos(), false);
    got.insert(got.end(), ids.begin(), ids.end());
    got.push_back(tok.eos());
    roundtrip_failures += tok.decode(ids) != line;
    ++lines_checked;
  }
  EXPECT_EQ(lines_checked, 5891);
  ASSERT_EQ(got.size(), want.size());
  size_t first_diff = 0;
  while (first_diff < got.size() && got[first_diff] == want[first_diff]) ++first_diff;
  EXPECT_EQ(first_diff, got.size()) << "first difference at stream position " << first_diff;
  EXPECT_EQ(roundtrip_failures, 0);
}

TEST(FixtureTokenizer, HfDirMatchesSentencePiece) {
  const ts::Tokenizer tok = ts::Tokenizer::from_hf_dir(kDir);
  expect_fixture_metadata(tok);
  expect_matches_sentencepiece(tok);
}

TEST(FixtureTokenizer, GgufMatchesSentencePiece) {
  const std::string path = tiny_moe_gguf();
  TS_REQUIRE_SHARED(path);
  const auto file = ts::GgufFile::open(path);
  const ts::Tokenizer tok = ts::Tokenizer::from_gguf(*file);
  expect_fixture_metadata(tok);
  expect_matches_sentencepiece(tok);
}

// Gemma 4's GGUF vocabulary (tokenizer.ggml.model = gemma4): the fixture's pieces merged by the
// merges llama.cpp's converter lists, without a dummy prefix: a text with a leading space gives
// the SentencePiece library's ids of the text.
TEST(FixtureTokenizer, Gemma4GgufMergesMatchSentencePiece) {
  const std::string path = ts::test::shared_path("fixtures/gemma4/model-f32.gguf");
  TS_REQUIRE_SHARED(path);
  const auto file = ts::GgufFile::open(path);
  const ts::Tokenizer tok = ts::Tokenizer::from_gguf(*file);
  EXPECT_EQ(tok.kind(), ts::TokenizerKind::SentencePiece);
  EXPECT_FALSE(tok.add_space_prefix());
  EXPECT_TRUE(tok.add_bos());
  std::istringstream lines(read_file(kDir + "/spm_expected.jsonl"));
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    const std::string text = j["text"].get<std::string>();
    if (text.empty()) continue;
    EXPECT_EQ(tok.encode(" " + text, false, false), j["ids"].get<std::vector<int32_t>>())
        << "text '" << text << "'";
    ++n;
  }
  EXPECT_EQ(n, 50);
  // And the corpus stream (valid.tokens: BOS + ids + EOS of each non-empty line of valid.txt).
  const std::string txt = ts::test::shared_path("corpus/valid.txt");
  const std::string bin = ts::test::shared_path("corpus/valid.tokens");
  if (txt.empty() || bin.empty()) return;
  const std::string raw = read_file(bin);
  std::vector<int32_t> want(raw.size() / 4), got;
  std::memcpy(want.data(), raw.data(), want.size() * 4);
  std::istringstream corpus(read_file(txt));
  while (std::getline(corpus, line)) {
    if (line.empty()) continue;
    const std::vector<int32_t> ids = tok.encode(" " + line, true, false);
    got.insert(got.end(), ids.begin(), ids.end());
    got.push_back(tok.eos());
  }
  ASSERT_EQ(got.size(), want.size());
  size_t first_diff = 0;
  while (first_diff < got.size() && got[first_diff] == want[first_diff]) ++first_diff;
  EXPECT_EQ(first_diff, got.size()) << "first difference at stream position " << first_diff;
}

TEST(FixtureTokenizer, HfDirReproducesCorpusStream) {
  expect_corpus_stream(ts::Tokenizer::from_hf_dir(kDir));
}

TEST(FixtureTokenizer, GgufReproducesCorpusStream) {
  const std::string path = tiny_moe_gguf();
  TS_REQUIRE_SHARED(path);
  const auto file = ts::GgufFile::open(path);
  expect_corpus_stream(ts::Tokenizer::from_gguf(*file));
}

TEST(FixtureTokenizer, EncodeAddsBosAndParsesSpecialOnlyWhenAsked) {
  const ts::Tokenizer tok = ts::Tokenizer::from_hf_dir(kDir);
  const std::vector<int32_t> plain = tok.encode("Hello world", false, false);
  std::vector<int32_t> with_bos = {1};
  with_bos.insert(with_bos.end(), plain.begin(), plain.end());
  EXPECT_EQ(tok.encode("Hello world", true, false), with_bos);
  // "</s>" as text is pieces of text unless special parsing is on; the text after a special token
  // gets the dummy space prefix again, as llama.cpp and HF do.
  const std::vector<int32_t> parsed = tok.encode("Hi</s>Hi", false, true);
  const std::vector<int32_t> hi = tok.encode("Hi", false, false);
  std::vector<int32_t> want = hi;
  want.push_back(2);
  want.insert(want.end(), hi.begin(), hi.end());
  EXPECT_EQ(parsed, want);
  const std::vector<int32_t> unparsed = tok.encode("Hi</s>Hi", false, false);
  EXPECT_EQ(std::count(unparsed.begin(), unparsed.end(), 2), 0);
  EXPECT_EQ(tok.decode(unparsed), "Hi</s>Hi");
}

TEST(FixtureTokenizer, StreamingDecodeHoldsPartialCharacters) {
  const ts::Tokenizer tok = ts::Tokenizer::from_hf_dir(kDir);
  // The llama is not a piece of this vocabulary: it comes out as four byte tokens.
  const std::string text = "A llama \xF0\x9F\xA6\x99 ok";
  const std::vector<int32_t> ids = tok.encode(text, true, false);
  ts::TextStream stream(tok);
  std::string out;
  bool held_partial = false;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    if (tok.token_type(id) == ts::TokenType::Byte && piece.empty()) held_partial = true;
    out += piece;
  }
  out += stream.flush();
  EXPECT_TRUE(held_partial);
  EXPECT_EQ(out, " " + text);  // the stream keeps the dummy-prefix space; decode() drops it
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(SentencePieceModelFile, ReadsTrainerAndNormalizerFields) {
  const ts::SentencePieceModel m = ts::read_sentencepiece_model(kDir + "/tokenizer.model");
  ASSERT_EQ(m.pieces.size(), 4096u);
  EXPECT_EQ(m.model_type, 2);
  EXPECT_TRUE(m.byte_fallback);
  EXPECT_EQ(m.unk_id, 0);
  EXPECT_EQ(m.bos_id, 1);
  EXPECT_EQ(m.eos_id, 2);
  EXPECT_EQ(m.pad_id, -1);
  EXPECT_TRUE(m.add_dummy_prefix);
  EXPECT_FALSE(m.remove_extra_whitespaces);
  EXPECT_EQ(m.normalizer_name, "identity");
  EXPECT_EQ(m.pieces[0].text, "<unk>");
  EXPECT_EQ(m.pieces[0].type, 2);
  EXPECT_EQ(m.pieces[3].text, "<0x00>");
  EXPECT_EQ(m.pieces[3].type, 6);
  EXPECT_EQ(m.pieces[259].text, "\xE2\x96\x81t");
  EXPECT_LT(m.pieces[260].score, m.pieces[259].score);  // BPE scores fall with merge order
}

// Every truncation and random corruption of a real model file parses or throws ts::Error:
// nothing reads past the buffer (the ASan build checks that) and nothing else escapes.
TEST(SentencePieceModelFile, TruncatedOrCorruptedFilesFailCleanly) {
  const std::string bytes = read_file(kDir + "/tokenizer.model");
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const auto try_parse = [](const uint8_t* p, size_t n) {
    try {
      ts::parse_sentencepiece_model(p, n, "test");
      return true;
    } catch (const ts::Error&) {
      return false;
    }
  };
  int rejected = 0;
  for (size_t n = 0; n < bytes.size(); n += n < 600 ? 1 : 131) rejected += !try_parse(data, n);
  EXPECT_GT(rejected, 0);
  ts::Rng rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    std::string copy = bytes;
    for (int k = 0; k < 4; ++k) copy[rng.next() % copy.size()] = static_cast<char>(rng.next());
    try_parse(reinterpret_cast<const uint8_t*>(copy.data()), copy.size());
  }
}

}  // namespace
