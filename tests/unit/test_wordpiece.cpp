// WordPiece (BERT) tokenization against HF tokenizers on the bert_embedding fixture
// (tools/reference/make_bert_fixture.py): the same ids from its tokenizer.json and from the GGUF
// llama.cpp's converter wrote, for strings that exercise the normaliser (accents composed and
// decomposed, case, control and CJK characters) and the pre-tokenizer (punctuation, whitespace,
// over-long and unknown words); the same from vocab.txt alone. Plus the Unicode steps on their
// own.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "test_paths.h"
#include "text/bert_basic_tokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode_props.h"

namespace ts {
namespace {

using nlohmann::json;

std::string fixture(const std::string& file) {
  return test::fixtures_dir() + "/models/bert_embedding/" + file;
}

json reference() {
  std::ifstream f(fixture("ref.json"));
  return json::parse(f);
}

void expect_hf_ids(const Tokenizer& tok, const char* form) {
  const json ref = reference();
  EXPECT_EQ(tok.kind(), TokenizerKind::WordPiece);
  for (const char* strings : {"tricky", "inputs"}) {
    const char* ids = std::string(strings) == "tricky" ? "tricky_ids" : "ids";
    for (size_t i = 0; i < ref[strings].size(); ++i) {
      const auto text = ref[strings][i].get<std::string>();
      std::vector<int32_t> got = tok.encode(text, tok.add_bos(), true);
      if (tok.add_eos()) got.push_back(tok.eos());
      EXPECT_EQ(got, ref[ids][i].get<std::vector<int32_t>>()) << form << ": '" << text << "'";
    }
  }
}

TEST(WordPiece, HfTokenizerJsonMatchesTokenizers) {
  expect_hf_ids(Tokenizer::from_hf_dir(fixture("hf")), "tokenizer.json");
}

TEST(WordPiece, GgufVocabularyMatchesTokenizers) {
  expect_hf_ids(Tokenizer::from_gguf(*GgufFile::open(fixture("model-f32.gguf"))), "gguf");
}

// A checkpoint without tokenizer.json: vocab.txt and tokenizer_config.json (BertTokenizer).
TEST(WordPiece, VocabTxtMatchesTokenizers) {
  const std::string dir = test::scratch_path("vocab_txt");
  ASSERT_EQ(test::run_command("rm -rf " + dir + " && mkdir -p " + dir + " && cp " +
                              fixture("hf/vocab.txt") + " " + fixture("hf/tokenizer_config.json") +
                              " " + dir),
            0);
  expect_hf_ids(Tokenizer::from_hf_dir(dir), "vocab.txt");
}

TEST(WordPiece, DecodeJoinsContinuations) {
  const Tokenizer tok = Tokenizer::from_hf_dir(fixture("hf"));
  const std::vector<int32_t> ids = tok.encode("the river bridge", false, false);
  EXPECT_EQ(tok.decode(ids), "the river bridge");
}

TEST(WordPiece, BasicTokenizerSteps) {
  const BertNormalizerOptions uncased{};
  EXPECT_EQ(bert_words("Héllo,WORLD!", uncased),
            (std::vector<std::string>{"hello", ",", "world", "!"}));
  // Hangul decomposes to jamo, U+3099 (a nonspacing mark) goes, CJK ideographs stand alone.
  EXPECT_EQ(bert_words("한\u3067す東京x", uncased),
            (std::vector<std::string>{"\u1112\u1161\u11ab\u3066す", "東", "京", "x"}));
  BertNormalizerOptions cased;
  cased.lowercase = cased.strip_accents = false;
  EXPECT_EQ(bert_words("Ça\u200b va\u00a0bien", cased),
            (std::vector<std::string>{"Ça", "va", "bien"}));
  std::u32string out;
  append_lowercase(0x130, out);
  append_lowercase(U'Σ', out);
  append_lowercase(U'Ж', out);
  append_lowercase(U'Ａ', out);
  EXPECT_EQ(out, U"i\u0307σжａ");
}

}  // namespace
}  // namespace ts
