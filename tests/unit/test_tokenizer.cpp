// Tokenizer mechanics on small hand-built vocabularies, where every expected id follows from the
// rules by hand: byte-level BPE merge order and ignore_merges, SentencePiece score order, byte
// fallback and space handling, special-token splitting (parse_special, user-defined, lstrip /
// rstrip), end-of-generation detection, and the errors for bad metadata and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_paths.h"
#include "text/byte_unicode.h"
#include "text/detokenizer.h"
#include "text/pretokenizer.h"
#include "text/special_tokens.h"
#include "text/tokenizer.h"

namespace {

using ts::TokenType;

// A byte-level BPE vocabulary: the 256 byte characters, then `extra` tokens.
ts::TokenizerSpec bpe_spec(const std::vector<std::string>& extra,
                           const std::vector<std::pair<std::string, std::string>>& merges) {
  ts::TokenizerSpec s;
  s.kind = ts::TokenizerKind::ByteLevelBpe;
  s.source = "test-bpe";
  for (int b = 0; b < 256; ++b)
    s.tokens.push_back(ts::bytes_to_byte_level(std::string(1, static_cast<char>(b))));
  for (const std::string& t : extra) s.tokens.push_back(t);
  s.merges = merges;
  s.pre_name = "gpt-2";
  s.pre_patterns = ts::pre_tokenizer_patterns("gpt-2", "test");
  return s;
}

int32_t id(const ts::Tokenizer& t, const std::string& text) {
  const auto i = t.find_token(text);
  EXPECT_TRUE(i.has_value()) << "no token '" << text << "'";
  return i.value_or(-1);
}

int32_t byte_id(unsigned char c) {
  return c;
}  // bpe_spec puts byte b at id b

TEST(ByteLevel, AlphabetRoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string spelled = ts::bytes_to_byte_level(all);
  EXPECT_EQ(ts::byte_level_to_bytes(spelled), all);
  EXPECT_EQ(ts::bytes_to_byte_level(" "), "\xC4\xA0");   // 'Ġ'
  EXPECT_EQ(ts::bytes_to_byte_level("\n"), "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(ts::bytes_to_byte_level("A~"), "A~");
}

TEST(StreamingUtf8, CompleteCharactersPassIncompleteWaitMalformedBecomeReplacement) {
  const std::string fffd = "\xEF\xBF\xBD";
  std::string out;
  EXPECT_EQ(ts::take_complete_utf8("ab\xE2\x96", out), 2u);  // the 3-byte character waits
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(ts::take_complete_utf8("\xE2\x96\x81z", out), 4u);
  EXPECT_EQ(out, "\xE2\x96\x81z");
  out.clear();
  EXPECT_EQ(ts::take_complete_utf8("\xFFx", out), 2u);  // never valid: replaced at once
  EXPECT_EQ(out, fffd + "x");
  out.clear();
  EXPECT_EQ(ts::take_complete_utf8("\xE0\x80", out), 2u);  // an overlong form cannot complete
  EXPECT_EQ(out, fffd + fffd);
  out.clear();
  EXPECT_EQ(ts::take_complete_utf8("\xF0\x9F", out), 0u);  // the start of an emoji waits
  EXPECT_EQ(out, "");
}

TEST(PreTokenizer, Gpt2PatternSplitsWordsSpacesAndContractions) {
  const ts::PreTokenizer pre(ts::pre_tokenizer_patterns("gpt-2", "test"), "test");
  const auto pieces = pre.split("I'm  here, 123 ok\n");
  const std::vector<std::string_view> want = {"I", "'m", " ", " here", ",", " 123", " ok", "\n"};
  EXPECT_EQ(pieces, want);
}

TEST(PreTokenizer, SequenceOfPatternsCutsEachPieceFurther) {
  // starcoder: digits one by one first, then GPT-2's pattern inside the remaining pieces.
  const ts::PreTokenizer pre(ts::pre_tokenizer_patterns("starcoder", "test"), "test");
  const std::vector<std::string_view> want = {"a", "1", "2", "3", " b"};
  EXPECT_EQ(pre.split("a123 b"), want);
  EXPECT_TRUE(pre.split("").empty());
}

TEST(PreTokenizer, KimiK2SplitsAsItsTiktokenPattern) {
  // The pieces Python's `regex` (V1: class intersections) gives for tokenization_kimi.py's own
  // pattern: Han runs apart from other letters, camel case split, kana with letters.
  const ts::PreTokenizer pre(ts::pre_tokenizer_patterns("kimi-k2", "test"), "test");
  const std::vector<std::string_view> want = {"Hello",
                                              "World",
                                              " ",
                                              "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c",
                                              "abc",
                                              " DON'T",
                                              " stop",
                                              ",",
                                              " ",
                                              "123",
                                              "45",
                                              " \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
                                              "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
                                              "\xe3\x82\xab\xe3\x82\xbf\xe3\x82\xab\xe3\x83\x8a",
                                              "!\n\n",
                                              " ",
                                              " x"};
  EXPECT_EQ(pre.split("HelloWorld \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c"
                      "abc DON'T stop, 12345 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82"
                      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x82\xab\xe3\x82\xbf\xe3\x82\xab\xe3"
                      "\x83\x8a!\n\n  x"),
            want);
}

TEST(PreTokenizer, UnknownNameIsRefusedNamingTheKey) {
  try {
    ts::pre_tokenizer_patterns("no-such-pre", "model.gguf");
    FAIL();
  } catch (const ts::Error& e) {
    EXPECT_EQ(e.kind(), ts::ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.pre = 'no-such-pre'"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ts::pre_tokenizer_patterns("", "m"), ts::pre_tokenizer_patterns("default", "m"));
}

TEST(BytePairEncoding, MergesInRankOrder) {
  // "hello": e+l (rank 0) wins over h+e (rank 1) and l+l (rank 2); then el+l, h+ell, hell+o.
  const ts::Tokenizer t(
      bpe_spec({"el", "he", "ll", "ell", "hell", "hello"},
               {{"e", "l"}, {"h", "e"}, {"l", "l"}, {"el", "l"}, {"h", "ell"}, {"hell", "o"}}));
  EXPECT_EQ(t.encode("hello", false, false), std::vector<int32_t>{id(t, "hello")});
  // "hel": e+l first, then nothing joins h and el.
  EXPECT_EQ(t.encode("hel", false, false), (std::vector<int32_t>{byte_id('h'), id(t, "el")}));
  // "hlo": no rule applies.
  EXPECT_EQ(t.encode("hlo", false, false),
            (std::vector<int32_t>{byte_id('h'), byte_id('l'), byte_id('o')}));
  // Words never merge across the pre-tokenizer's cuts: " hello" is "Ġhello", which has no rule
  // for Ġ+h, so Ġ stays alone.
  const std::vector<int32_t> spaced = t.encode("hello hello", false, false);
  EXPECT_EQ(spaced, (std::vector<int32_t>{id(t, "hello"), id(t, "\xC4\xA0"), id(t, "hello")}));
  EXPECT_EQ(t.decode(spaced), "hello hello");
}

TEST(BytePairEncoding, IgnoreMergesTakesWholeWordTokens) {
  // "abc" is a token but no merge rule builds it.
  auto spec = bpe_spec({"ab", "abc"}, {{"a", "b"}});
  const ts::Tokenizer merging(spec);
  EXPECT_EQ(merging.encode("abc", false, false),
            (std::vector<int32_t>{id(merging, "ab"), byte_id('c')}));
  spec.ignore_merges = true;
  const ts::Tokenizer whole(spec);
  EXPECT_EQ(whole.encode("abc", false, false), std::vector<int32_t>{id(whole, "abc")});
}

TEST(BytePairEncoding, MultiByteCharactersAreByteLevelPieces) {
  const ts::Tokenizer t(bpe_spec({}, {{"a", "b"}}));
  // 'é' is C3 A9: two byte characters, two tokens, and decoding joins them back.
  const std::vector<int32_t> ids = t.encode("\xC3\xA9", false, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{0xC3, 0xA9}));
  EXPECT_EQ(t.token_to_piece(0xC3), "\xC3");
  EXPECT_EQ(t.decode(ids), "\xC3\xA9");
}

TEST(SpecialTokens, ControlOnlyWhenParsedUserDefinedAlways) {
  auto spec = bpe_spec({"<|end|>", "<tag>"}, {{"a", "b"}});
  spec.types.assign(spec.tokens.size(), TokenType::Normal);
  spec.types[256] = TokenType::Control;
  spec.types[257] = TokenType::UserDefined;
  const ts::Tokenizer t(spec);
  EXPECT_EQ(t.encode("x<|end|>", false, true), (std::vector<int32_t>{byte_id('x'), 256}));
  const std::vector<int32_t> unparsed = t.encode("x<|end|>", false, false);
  EXPECT_EQ(std::count(unparsed.begin(), unparsed.end(), 256), 0);
  EXPECT_EQ(t.decode(unparsed), "x<|end|>");
  EXPECT_EQ(t.encode("x<tag>y", false, false),
            (std::vector<int32_t>{byte_id('x'), 257, byte_id('y')}));
  EXPECT_EQ(t.token_to_piece(256), "<|end|>");
  EXPECT_EQ(t.token_to_piece(256, false), "");
  EXPECT_EQ(t.token_to_piece(257, false), "<tag>");  // user-defined tokens are text
}

TEST(SpecialTokens, LongerTokenWinsOverOneInsideIt) {
  auto spec = bpe_spec({"<a>", "<a><b>"}, {{"a", "b"}});
  spec.types.assign(spec.tokens.size(), TokenType::Normal);
  spec.types[256] = TokenType::Control;
  spec.types[257] = TokenType::Control;
  const ts::Tokenizer t(spec);
  EXPECT_EQ(t.encode("<a><b><a>", false, true), (std::vector<int32_t>{257, 256}));
}

TEST(SpecialTokens, LstripAndRstripSwallowWhitespace) {
  auto spec = bpe_spec({"<m>"}, {{"a", "b"}});
  spec.types.assign(spec.tokens.size(), TokenType::Normal);
  spec.types[256] = TokenType::Control;
  spec.lstrip = {256};
  spec.rstrip = {256};
  const ts::Tokenizer t(spec);
  EXPECT_EQ(t.encode("a \t<m>  b", false, true),
            (std::vector<int32_t>{byte_id('a'), 256, byte_id('b')}));
}

TEST(SpecialTokens, EndOfTurnSpellingsAreEndOfGeneration) {
  auto spec = bpe_spec({"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<reponame>"}, {{"a", "b"}});
  spec.eos = 256;
  ts::detect_end_of_generation(spec);
  const ts::Tokenizer t(spec);
  EXPECT_EQ(t.eos(), 256);
  EXPECT_EQ(t.eot(), 258);  // <|im_end|> is preferred to <|endoftext|> as the turn end
  EXPECT_TRUE(t.is_eog(256));
  EXPECT_TRUE(t.is_eog(258));
  EXPECT_FALSE(t.is_eog(257));
  EXPECT_EQ(t.token_type(258), TokenType::Control);
  EXPECT_TRUE(t.is_eog(259));  // a FIM repository separator ends a completion
  EXPECT_EQ(t.eog_ids(), (std::vector<int32_t>{256, 258, 259}));
}

// SentencePiece: <unk> <s> </s>, the 256 byte pieces (ids 3..258), then `pieces` with scores.
ts::TokenizerSpec spm_spec(const std::vector<std::pair<std::string, float>>& pieces) {
  ts::TokenizerSpec s;
  s.kind = ts::TokenizerKind::SentencePiece;
  s.source = "test-spm";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.types = {TokenType::Unknown, TokenType::Control, TokenType::Control};
  s.scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    s.tokens.push_back(buf);
    s.types.push_back(TokenType::Byte);
    s.scores.push_back(0);
  }
  for (const auto& [p, score] : pieces) {
    s.tokens.push_back(p);
    s.types.push_back(TokenType::Normal);
    s.scores.push_back(score);
  }
  s.unk = 0;
  s.bos = 1;
  s.eos = 2;
  s.add_bos = true;
  s.add_space_prefix = true;
  return s;
}

const std::string kSp = "\xE2\x96\x81";  // U+2581

// A file's token text quoted in an error keeps the error one inert line (found by fuzzing
// tokenizer.model: a byte piece spelled with a line break).
TEST(SentencePiece, ErrorsQuoteFileTextOnOneLine) {
  ts::TokenizerSpec s = spm_spec({});
  s.tokens[3 + 0x41] = "<0\nA>\x1b[2J";
  try {
    const ts::Tokenizer t(std::move(s));
    FAIL() << "a byte piece that is not <0xNN> was accepted";
  } catch (const ts::Error& e) {
    EXPECT_EQ(e.kind(), ts::ErrorKind::Model);
    EXPECT_EQ(std::string(e.what()), "test-spm: byte token 68 is '<0\\x0aA>\\x1b[2J', not <0xNN>");
  }
}

TEST(SentencePiece, MergesByScoreNotByPosition) {
  // In "▁ab", a+b (score -1) beats ▁+a (score -2); ▁ and ab then join into ▁ab.
  auto pieces = std::vector<std::pair<std::string, float>>{
      {kSp, -10}, {"a", -10}, {"b", -10}, {kSp + "a", -2}, {"ab", -1}, {kSp + "ab", -3}};
  const ts::Tokenizer t(spm_spec(pieces));
  EXPECT_EQ(t.encode("ab", false, false), std::vector<int32_t>{id(t, kSp + "ab")});
  // Without ▁ab, the pieces stay ▁ + ab (a+b was taken first, ▁a never forms).
  pieces.pop_back();
  const ts::Tokenizer u(spm_spec(pieces));
  EXPECT_EQ(u.encode("ab", false, false), (std::vector<int32_t>{id(u, kSp), id(u, "ab")}));
  EXPECT_EQ(u.encode("ab", true, false), (std::vector<int32_t>{1, id(u, kSp), id(u, "ab")}));
  EXPECT_EQ(u.decode({1, id(u, kSp), id(u, "ab")}), "ab");
}

TEST(SentencePiece, ByteFallbackAndSpaces) {
  const ts::Tokenizer t(spm_spec({{kSp, -1}, {"a", -1}}));
  // 'ç' (C3 A7) is not a piece: two byte tokens, ids 3 + byte.
  EXPECT_EQ(t.encode("a\xC3\xA7", false, false),
            (std::vector<int32_t>{id(t, kSp), id(t, "a"), 3 + 0xC3, 3 + 0xA7}));
  EXPECT_EQ(t.token_to_piece(3 + 0xC3), "\xC3");
  EXPECT_EQ(t.decode(t.encode("a \xC3\xA7  a", false, false)), "a \xC3\xA7  a");
  EXPECT_EQ(t.encode("", false, false), std::vector<int32_t>{});
}

TEST(SentencePiece, UnknownCharacterWithoutByteFallbackIsOneUnk) {
  ts::TokenizerSpec s;
  s.kind = ts::TokenizerKind::SentencePiece;
  s.source = "test-spm-nobytes";
  s.tokens = {"<unk>", kSp, "a"};
  s.types = {TokenType::Unknown, TokenType::Normal, TokenType::Normal};
  s.scores = {0, -1, -1};
  s.unk = 0;
  s.add_space_prefix = true;
  const ts::Tokenizer t(s);
  EXPECT_EQ(t.encode("a\xC3\xA7"
                     "a",
                     false, false),
            (std::vector<int32_t>{1, 2, 0, 2}));
  s.unk = -1;
  const ts::Tokenizer no_unk(s);
  EXPECT_THROW(no_unk.encode("\xC3\xA7", false, false), ts::Error);
}

TEST(SentencePiece, SpacePrefixAndExtraWhitespaceOptions) {
  auto spec = spm_spec({{kSp, -1}, {"a", -1}});
  spec.add_space_prefix = false;
  const ts::Tokenizer no_prefix(spec);
  EXPECT_EQ(no_prefix.encode("a", false, false), std::vector<int32_t>{id(no_prefix, "a")});
  spec.remove_extra_whitespaces = true;
  const ts::Tokenizer collapsing(spec);
  EXPECT_EQ(collapsing.encode("  a   a ", false, false),
            (std::vector<int32_t>{id(collapsing, "a"), id(collapsing, kSp), id(collapsing, "a")}));
}

TEST(TokenizerErrors, BadInputAndIdsAreReported) {
  const ts::Tokenizer t(spm_spec({{kSp, -1}}));
  try {
    t.encode("ok\xFF", false, false);
    FAIL();
  } catch (const ts::Error& e) {
    EXPECT_EQ(e.kind(), ts::ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("byte offset 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.token_to_piece(t.vocab_size()), ts::Error);
  EXPECT_THROW(t.token_to_piece(-1), ts::Error);
  EXPECT_THROW(t.decode({0, 99999}), ts::Error);
}

TEST(TokenizerErrors, InconsistentSpecIsRefused) {
  auto bad_scores = spm_spec({{kSp, -1}});
  bad_scores.scores.pop_back();
  EXPECT_THROW(ts::Tokenizer{bad_scores}, ts::Error);
  auto bad_bos = spm_spec({{kSp, -1}});
  bad_bos.bos = 100000;
  EXPECT_THROW(ts::Tokenizer{bad_bos}, ts::Error);
  auto no_merges = bpe_spec({}, {});
  EXPECT_THROW(ts::Tokenizer{no_merges}, ts::Error);
}

// A vocab-only GGUF written with the project's writer.
std::string write_vocab_gguf(const std::vector<std::pair<std::string, ts::GgufValue>>& kv) {
  ts::GgufWriter w;
  for (const auto& [k, v] : kv) w.add_kv(k, v);
  const std::string path = ts::test::scratch_path("vocab_test.gguf");
  w.write(path);
  return path;
}

ts::GgufValue strings(std::vector<std::string> s) {
  ts::GgufArray a;
  a.elem = ts::GgufType::String;
  a.strings = std::move(s);
  return ts::gguf_array(std::move(a));
}

ts::GgufValue ints(std::vector<int64_t> v) {
  ts::GgufArray a;
  a.elem = ts::GgufType::I32;
  a.ints = std::move(v);
  return ts::gguf_array(std::move(a));
}

ts::GgufValue floats(std::vector<double> v) {
  ts::GgufArray a;
  a.elem = ts::GgufType::F32;
  a.floats = std::move(v);
  return ts::gguf_array(std::move(a));
}

std::string gguf_error(const std::vector<std::pair<std::string, ts::GgufValue>>& kv) {
  const auto file = ts::GgufFile::open(write_vocab_gguf(kv));
  try {
    ts::Tokenizer::from_gguf(*file);
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "";
}

TEST(GgufVocab, ReadsKeysAndNamesTheBadOne) {
  const std::vector<std::pair<std::string, ts::GgufValue>> base = {
      {"tokenizer.ggml.model", ts::gguf_string("llama")},
      {"tokenizer.ggml.tokens", strings({"<unk>", "<s>", "</s>", kSp, "a"})},
      {"tokenizer.ggml.scores", floats({0, 0, 0, -1, -1})},
      {"tokenizer.ggml.token_type", ints({2, 3, 3, 1, 1})},
  };
  {
    const auto file = ts::GgufFile::open(write_vocab_gguf(base));
    const ts::Tokenizer t = ts::Tokenizer::from_gguf(*file);
    EXPECT_EQ(t.bos(), 1);  // llama.cpp's SentencePiece defaults when the keys are absent
    EXPECT_EQ(t.eos(), 2);
    EXPECT_TRUE(t.add_bos());
    EXPECT_EQ(t.encode("a", true, false), (std::vector<int32_t>{1, 3, 4}));
  }
  auto with = [&](std::string key, ts::GgufValue v) {
    auto kv = base;
    for (auto& [k, val] : kv)
      if (k == key) val = v;
    if (std::none_of(kv.begin(), kv.end(), [&](const auto& p) { return p.first == key; }))
      kv.emplace_back(key, v);
    return gguf_error(kv);
  };
  EXPECT_NE(with("tokenizer.ggml.bos_token_id", ts::gguf_int(ts::GgufType::U32, 5))
                .find("tokenizer.ggml.bos_token_id"),
            std::string::npos);
  EXPECT_NE(with("tokenizer.ggml.scores", floats({0, 0})).find("tokenizer.ggml.scores"),
            std::string::npos);
  EXPECT_NE(
      with("tokenizer.ggml.token_type", ints({2, 3, 3, 1, 9})).find("tokenizer.ggml.token_type"),
      std::string::npos);
  EXPECT_NE(with("tokenizer.ggml.model", ts::gguf_string("rwkv")).find("tokenizer.ggml.model"),
            std::string::npos);
  EXPECT_NE(with("tokenizer.ggml.model", ts::gguf_string("gpt2")).find("tokenizer.ggml.merges"),
            std::string::npos);
}

// A byte-level tokenizer.json: the 256 byte characters, "ab" and "Ġab" by merges, one special
// and one non-special added token, digits split before GPT-2's regex.
nlohmann::json small_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b)
    vocab[ts::bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  vocab
      ["\xC4\xA0"
       "ab"] = 257;
  return {
      {"added_tokens",
       {{{"id", 258}, {"content", "<|im_end|>"}, {"special", true}},
        {{"id", 259}, {"content", "<tag>"}, {"special", false}, {"rstrip", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Digits"}, {"individual_digits", true}}, {{"type", "ByteLevel"}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        // Both spellings of a merge that tokenizers versions write.
        {"merges", nlohmann::json::array({"a b", nlohmann::json::array({"\xC4\xA0", "ab"})})}}},
  };
}

std::string write_hf_dir(const nlohmann::json& tokenizer, const std::string& config) {
  const std::string dir = ts::test::scratch_path("hf_tok");
  EXPECT_EQ(ts::test::run_command("rm -rf " + dir + " && mkdir -p " + dir), 0);
  std::ofstream(dir + "/tokenizer.json") << tokenizer.dump();
  if (!config.empty()) std::ofstream(dir + "/tokenizer_config.json") << config;
  return dir;
}

TEST(HfTokenizerJson, ByteLevelVocabMergesAddedTokensAndConfig) {
  const ts::Tokenizer t = ts::Tokenizer::from_hf_dir(
      write_hf_dir(small_tokenizer_json(),
                   R"({"eos_token": {"content": "<|im_end|>"}, "add_bos_token": false})"));
  EXPECT_EQ(t.kind(), ts::TokenizerKind::ByteLevelBpe);
  EXPECT_EQ(t.vocab_size(), 260);
  EXPECT_EQ(t.eos(), 258);
  EXPECT_EQ(t.eot(), 258);
  EXPECT_TRUE(t.is_eog(258));
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.token_type(258), TokenType::Control);
  EXPECT_EQ(t.token_type(259), TokenType::UserDefined);
  // "ab ab12": ab, Ġab, then the digits one by one.
  EXPECT_EQ(t.encode("ab ab12", false, false), (std::vector<int32_t>{256, 257, '1', '2'}));
  EXPECT_EQ(t.encode("x<|im_end|>", false, true), (std::vector<int32_t>{'x', 258}));
  // <tag> strips the spaces after it.
  EXPECT_EQ(t.encode("x<tag>  ab", false, false), (std::vector<int32_t>{'x', 259, 256}));
}

TEST(HfTokenizerJson, UnsupportedOrBrokenFilesAreRefusedByName) {
  const auto error_of = [](const nlohmann::json& j) {
    try {
      ts::Tokenizer::from_hf_dir(write_hf_dir(j, ""));
    } catch (const ts::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto j = small_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(error_of(j).find("pre-tokenizer 'Whitespace'"), std::string::npos);
  j = small_tokenizer_json();
  j["model"]["vocab"].erase("ab");
  EXPECT_NE(error_of(j).find("token id 256"), std::string::npos);
  j = small_tokenizer_json();
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(error_of(j).find("unk_token names token '[UNK]'"), std::string::npos);
  j["model"]["unk_token"] = "ab";  // a WordPiece vocabulary reads only BERT's normaliser
  EXPECT_NE(error_of(j).find("normalizer 'none' is not supported with WordPiece"),
            std::string::npos);
  j = small_tokenizer_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(error_of(j).find("normalizer 'Lowercase'"), std::string::npos);
  const std::string empty = ts::test::scratch_path("hf_empty");
  ASSERT_EQ(ts::test::run_command("rm -rf " + empty + " && mkdir -p " + empty), 0);
  EXPECT_THROW(ts::Tokenizer::from_hf_dir(empty), ts::Error);
  std::ofstream(empty + "/tokenizer.json") << "{not json";
  EXPECT_THROW(ts::Tokenizer::from_hf_dir(empty), ts::Error);
}

}  // namespace
