// Unigram (SentencePiece unigram model) tokenization on the xlm_roberta fixture
// (tools/reference/make_xlm_roberta_fixture.py), whose normaliser is a subset of XLM-R's
// nmt_nfkc rules: its tokenizer.json (transformers 5's pipeline, transformers 4's that the
// published XLM-R models ship, and 4.4x's with Strip) gives HF tokenizers' ids, and its GGUF
// (llama.cpp's converter, "t5" with the precompiled charsmap) gives llama.cpp's and
// sentencepiece's, for strings that exercise the charsmap (composed and decomposed accents,
// full-width and half-width forms, ligatures, odd spaces), the whitespace rules and unknown
// characters. Malformed charsmaps and pipelines outside what is implemented are refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "fixture_models.h"
#include "formats/gguf.h"
#include "test_paths.h"
#include "text/precompiled_charsmap.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

using nlohmann::json;

std::string fixture(const std::string& file) {
  return test::fixtures_dir() + "/models/xlm_roberta/" + file;
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

json reference() {
  return read_json(fixture("ref.json"));
}

Tokenizer gguf_tokenizer() {
  return Tokenizer::from_gguf(*GgufFile::open(fixture("model-f32.gguf")));
}

// Each string of `strings` with the model's BOS / EOS, against the reference ids `ids`.
void expect_ids(const Tokenizer& tok, const char* strings, const char* ids, bool parse_special) {
  const json ref = reference();
  ASSERT_EQ(ref[strings].size(), ref[ids].size()) << ids;
  for (size_t i = 0; i < ref[strings].size(); ++i) {
    const auto text = ref[strings][i].get<std::string>();
    std::vector<int32_t> got = tok.encode(text, tok.add_bos(), parse_special);
    if (tok.add_eos()) got.push_back(tok.eos());
    EXPECT_EQ(got, ref[ids][i].get<std::vector<int32_t>>())
        << tok.source() << " against " << ids << ": '" << text << "'";
  }
}

TEST(Unigram, TokenizerJsonMatchesTokenizers) {
  const Tokenizer tok = Tokenizer::from_hf_dir(fixture("hf"));
  EXPECT_EQ(tok.kind(), TokenizerKind::Unigram);
  EXPECT_EQ(tok.bos(), 0);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.unk(), 3);
  expect_ids(tok, "tricky", "tricky_ids", true);
  expect_ids(tok, "inputs", "ids", true);
}

// bge-m3's and multilingual-e5's tokenizer.json: Replace(" {2,}") and Metaspace alone, where a
// trailing space is a piece of its own.
TEST(Unigram, LegacyTokenizerJsonMatchesTokenizers) {
  expect_ids(Tokenizer::from_hf_dir(fixture("legacy_tokenizer")), "tricky", "legacy_ids", true);
}

TEST(Unigram, GgufMatchesLlamaCppAndSentencePiece) {
  const Tokenizer tok = gguf_tokenizer();
  EXPECT_EQ(tok.kind(), TokenizerKind::Unigram);
  expect_ids(tok, "tricky", "llama_ids", false);
  expect_ids(tok, "tricky", "spm_ids", false);
  // Special tokens written in the text are split out as HF's tokenizer does.
  expect_ids(tok, "tricky", "tricky_ids", true);
  expect_ids(tok, "inputs", "ids", true);
}

TEST(Unigram, DecodeGivesTheNormalisedText) {
  for (const Tokenizer& tok : {gguf_tokenizer(), Tokenizer::from_hf_dir(fixture("hf"))}) {
    const std::string text = "The quick brown fox jumps over the lazy dog.";
    EXPECT_EQ(tok.decode(tok.encode(text, true, true)), text) << tok.source();
    EXPECT_EQ(tok.decode(tok.encode("\xef\xbd\x94\xef\xbd\x88\xef\xbd\x85  dog", false, true)),
              "the dog")
        << tok.source();
    EXPECT_EQ(tok.token_to_piece(tok.unk()), "<unk>");
    EXPECT_EQ(tok.token_to_piece(tok.eos(), false), "");
  }
}

std::string blob(const std::vector<uint32_t>& units, std::string_view replacements) {
  const uint32_t bytes = static_cast<uint32_t>(units.size() * 4);
  std::string b(4 + bytes, '\0');
  std::memcpy(b.data(), &bytes, 4);
  std::memcpy(b.data() + 4, units.data(), bytes);
  return b.append(replacements);
}

// The fixture's charsmap rule by rule (nmt_nfkc's), and layouts that do not hold together
// refused with the blob's name, at load or where a walk leaves the trie.
TEST(Unigram, PrecompiledCharsmap) {
  const json tj = read_json(fixture("hf/tokenizer.json"));
  const auto gguf = GgufFile::open(fixture("model-f32.gguf"));
  std::string raw;
  for (int64_t b : gguf->get_array("tokenizer.ggml.precompiled_charsmap")->ints)
    raw.push_back(static_cast<char>(b));
  const PrecompiledCharsmap map(raw, "charsmap");
  EXPECT_EQ(map.normalize("\xef\xbc\xa1\xef\xbd\x82\xef\xbc\x91"), "Ab1");  // full-width
  EXPECT_EQ(map.normalize("e\xcc\x81t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");      // composed
  EXPECT_EQ(map.normalize("\xef\xac\x81 \xe2\x91\xa0"), "fi 1");            // ligature, circled
  EXPECT_EQ(map.normalize("a\tb\xc2\xa0"
                          "c"),
            "a b c");                                                    // odd spaces
  EXPECT_EQ(map.normalize("plain \xe6\x9d\xb1"), "plain \xe6\x9d\xb1");  // no rule
  EXPECT_TRUE(PrecompiledCharsmap().empty());

  EXPECT_NE(test::error_text([] {
              PrecompiledCharsmap(std::string_view("\x01\x00", 2), "cm");
            }).find("cm is 2 bytes"),
            std::string::npos);
  EXPECT_NE(test::error_text([] {
              PrecompiledCharsmap(blob({0}, ""), "cm");
            }).find("cm: the trie size 4 does not fit the 8 bytes"),
            std::string::npos);
  // One rule, "a" -> replacements[offset]: the root (unit 0, position 0) has the child 97
  // (label 'a', a leaf) whose BASE 96 puts its value unit at 97 ^ 96 = 1.
  const auto one_rule = [](uint32_t offset, uint32_t leaf_base) {
    std::vector<uint32_t> units(98, 0);
    units[97] = 97 | (1u << 8) | (leaf_base << 10);
    units[1] = (1u << 31) | offset;
    return blob(units, std::string_view("x\0", 2));
  };
  EXPECT_EQ(PrecompiledCharsmap(one_rule(0, 96), "cm").normalize("bab"), "bxb");
  EXPECT_NE(test::error_text([&] {
              PrecompiledCharsmap(one_rule(5, 96), "cm");
            }).find("cm: replacement offset 5 has no terminated string"),
            std::string::npos);
  EXPECT_NE(test::error_text([&] {
              PrecompiledCharsmap(one_rule(0, 1000), "cm");
            }).find("cm: a leaf's value unit 905 is outside the trie's 98"),
            std::string::npos);
}

// A copy of the legacy tokenizer.json with one part replaced, in a scratch directory.
std::string legacy_with(const char* part, const json& value) {
  json tj = read_json(fixture("legacy_tokenizer/tokenizer.json"));
  if (std::string(part) == "byte_fallback") {
    tj["model"]["byte_fallback"] = value;
  } else {
    tj[part] = value;
  }
  const std::string dir = test::scratch_path("unigram_variant");
  EXPECT_EQ(test::run_command("rm -rf " + dir + " && mkdir -p " + dir), 0);
  std::ofstream(dir + "/tokenizer.json") << tj.dump();
  return dir;
}

// The error loading the legacy tokenizer.json with `part` replaced gives.
std::string refusal(const char* part, const json& value) {
  const std::string dir = legacy_with(part, value);
  return test::error_text([&] { Tokenizer::from_hf_dir(dir); });
}

// transformers 4.4x's normaliser: the text's end stripped, runs of spaces one U+2581.
TEST(Unigram, StripAndMarkerReplaceMatchTokenizers) {
  const json legacy = read_json(fixture("legacy_tokenizer/tokenizer.json"));
  const json strip = {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}};
  const json replace = {
      {"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", "\xe2\x96\x81"}};
  const json steps = json::array({legacy["normalizer"]["normalizers"][0], strip, replace});
  const std::string dir = legacy_with("normalizer", {{"type", "Sequence"}, {"normalizers", steps}});
  expect_ids(Tokenizer::from_hf_dir(dir), "tricky", "strip_ids", true);
}

TEST(Unigram, UnsupportedPipelinesAreRefusedByName) {
  EXPECT_NE(refusal("normalizer", {{"type", "NFKC"}}).find("normalizer 'NFKC' is not supported"),
            std::string::npos);
  EXPECT_NE(
      refusal("normalizer", {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "b"}})
          .find("normalizer Replace of {\"String\":\"a\"} by 'b' is not supported"),
      std::string::npos);
  EXPECT_NE(refusal("pre_tokenizer", {{"type", "Whitespace"}})
                .find("pre_tokenizer 'Whitespace' is not supported with Unigram"),
            std::string::npos);
  EXPECT_NE(refusal("pre_tokenizer", nullptr).find("without Metaspace ('none')"),
            std::string::npos);
  EXPECT_NE(refusal("pre_tokenizer",
                    {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "always"}})
                .find("Metaspace replacement '_' is not supported"),
            std::string::npos);
  EXPECT_NE(
      refusal("pre_tokenizer",
              {{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}, {"prepend_scheme", "first"}})
          .find("prepend_scheme 'first' is not supported"),
      std::string::npos);
  EXPECT_NE(refusal("byte_fallback", true).find("model.byte_fallback is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace ts
