// JSON mode: the byte recognizer (JsonPrefix) accepts exactly the prefixes of JSON objects, byte
// by byte, refusing a byte as soon as no completion is possible; the constraint's mask over a real
// vocabulary (the bundled model's) allows exactly the tokens the recognizer accepts; generation
// in JSON mode on the bundled model gives text that parses as one object, greedy and sampled.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constrain/json_constraint.h"
#include "constrain/json_prefix.h"
#include "fixture_models.h"
#include "formats/gguf.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/model_tokenizer.h"
#include "runtime/session.h"
#include "test_paths.h"
#include "text/constraint_vocabulary.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

// The number of leading bytes of `text` the recognizer accepts (text.size() when all).
size_t accepted(const std::string& text) {
  JsonPrefix p;
  for (size_t i = 0; i < text.size(); ++i)
    if (!p.feed(static_cast<uint8_t>(text[i]))) return i;
  return text.size();
}

bool complete(const std::string& text) {
  JsonPrefix p;
  return p.feed_all(text) && p.complete();
}

TEST(JsonPrefix, AcceptsObjectsAndCompletesAtTheirEnd) {
  const std::vector<std::string> objects = {
      "{}",
      "\n\t{ }",
      R"({"a": 1})",
      R"({"a":[1,-2,3.5,-0.25e+3,0,0.0,1E9,4e-2],"b":{"c":null,"d":[true,false,[],{}]}})",
      R"({"s": "quote \" backslash \\ slash \/ \b\f\n\r\t \u00e9 \uD83D\uDE00 caf\u00C9"})",
      "{\"utf8\": \"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xED\x9F\xBF\"}",
      R"({"nested": [[[[{"x": [1, [2, [3]]]}]]]]})",
  };
  for (const std::string& o : objects) {
    EXPECT_TRUE(complete(o)) << o << " (accepted " << accepted(o) << " bytes)";
    EXPECT_TRUE(nlohmann::json::accept(o)) << o;
    // No proper prefix is complete: the closing brace ends it.
    JsonPrefix p;
    for (size_t i = 0; i + 1 < o.size(); ++i) {
      ASSERT_TRUE(p.feed(static_cast<uint8_t>(o[i])));
      EXPECT_FALSE(p.complete()) << o << " at " << i;
    }
  }
}

// Each refused text with the offset of the byte that makes it impossible to complete.
TEST(JsonPrefix, RefusesAtTheFirstImpossibleByte) {
  const std::vector<std::pair<std::string, size_t>> bad = {
      {"[]", 0},                             // the top level must be an object
      {"{'a': 1}", 1},                       // single quotes
      {R"({"a" 1})", 5},                     // missing colon
      {R"({"a": 01})", 7},                   // leading zero
      {R"({"a": -})", 7},                    // a minus without digits
      {R"({"a": 1.})", 8},                   // a point without digits
      {R"({"a": 1e})", 8},                   // an exponent without digits
      {R"({"a": tru})", 9},                  // not a literal
      {R"({"a": nul1})", 9},                 // not a literal
      {R"({"a": 1,})", 8},                   // trailing comma
      {R"({"a": [1,]})", 9},                 // trailing comma in an array
      {R"({"a": [1}})", 8},                  // mismatched bracket
      {R"({"a": 1}})", 8},                   // bytes after the object
      {R"({"a": 1} )", 8},                   // even whitespace: the object ended the text
      {"{\"a\": \"x\ny\"}", 8},              // a raw control character in a string
      {R"({"a": "\x"})", 8},                 // an unknown escape
      {R"({"a": "\u12G4"})", 11},            // not a hex digit
      {R"({"a": "\uDC00"})", 10},            // a lone low surrogate, at its second digit
      {R"({"a": "\uD800x"})", 13},           // a high surrogate not followed by \u
      {R"({"a": "\uD800\u0041"})", 15},      // ... nor by a low surrogate
      {"{\"a\": \"\xC0\xAF\"}", 7},          // an overlong lead byte
      {"{\"a\": \"\xE0\x80\x80\"}", 8},      // an overlong three-byte form
      {"{\"a\": \"\xED\xA0\x80\"}", 8},      // an encoded surrogate
      {"{\"a\": \"\xF4\x90\x80\x80\"}", 8},  // past U+10FFFF
      {"{\"a\": \"\xC3x\"}", 8},             // a missing continuation byte
      {R"({1: 2})", 1},                      // keys are strings
  };
  for (const auto& [text, at] : bad) {
    EXPECT_EQ(accepted(text), at) << text;
    EXPECT_FALSE(nlohmann::json::accept(text) && text[0] == '{' && accepted(text) == text.size())
        << text;
  }
}

TEST(JsonPrefix, LimitsDepthWhitespaceAndNumbers) {
  std::string deep = "{\"a\":";
  for (int i = 1; i < JsonPrefix::kMaxDepth; ++i) deep += "[";
  EXPECT_EQ(accepted(deep + "["), deep.size());  // the 65th container
  EXPECT_EQ(accepted(deep + "1"), deep.size() + 1);
  // Whitespace runs: one line break and a pretty-printer's indentation for the depth (4 a level),
  // plus one byte; '\r' not at all.
  const std::string spaces(JsonPrefix::whitespace_limit(1), ' ');
  EXPECT_EQ(spaces.size(), 5u);
  EXPECT_EQ(accepted("{" + spaces + " }"), 1 + spaces.size());
  EXPECT_TRUE(complete("{" + spaces + "\n}"));
  EXPECT_TRUE(complete("{\n  \"a\": [\n    1\n  ]\n}"));
  EXPECT_TRUE(complete("{\n    \"a\": [\n        1\n    ]\n}"));
  EXPECT_TRUE(complete("{\"a\":" + std::string(5, ' ') + "1}"));
  EXPECT_EQ(accepted("{\"a\":" + std::string(6, ' ')), 10u);
  EXPECT_TRUE(complete("{\"a\":[[\n" + std::string(13, ' ') + "1]]}"));  // 3 deep: 13
  EXPECT_EQ(accepted("{\"a\":[[\n" + std::string(14, ' ')), 21u);
  EXPECT_EQ(accepted("{\n\n}"), 2u);
  EXPECT_EQ(accepted("{ \n \t\n}"), 5u);
  EXPECT_EQ(JsonPrefix::whitespace_limit(JsonPrefix::kMaxDepth), JsonPrefix::kMaxWhitespace);
  EXPECT_EQ(accepted("{\r\n}"), 1u);
  // Numbers stay within a double's range (1e400 is refused by strict parsers).
  const std::string digits(JsonPrefix::kMaxDigits, '7');
  const std::string number = "{\"n\": -" + digits + "." + digits + "e+99}";
  EXPECT_TRUE(complete(number)) << number;
  EXPECT_EQ(accepted("{\"n\": " + digits + "7"), 6 + digits.size());
  EXPECT_EQ(accepted("{\"n\": 0." + digits + "7"), 8 + digits.size());
  EXPECT_EQ(accepted("{\"n\": 1e-999}"), 11u);
}

// The state does not change when a byte or a sequence is refused.
TEST(JsonPrefix, RefusalLeavesTheStateAsItWas) {
  JsonPrefix p;
  ASSERT_TRUE(p.feed_all(R"({"a": 12)"));
  EXPECT_FALSE(p.feed('x'));
  EXPECT_FALSE(p.feed_all("3]"));
  EXPECT_TRUE(p.accepts("3}"));
  ASSERT_TRUE(p.feed_all("3}"));
  EXPECT_TRUE(p.complete());
}

// The mask allows exactly the tokens whose bytes the recognizer accepts, at states of every kind
// (inside strings, where plain tokens skip the walk, too).
void expect_mask_matches(const Tokenizer& tok) {
  const auto vocab = json_vocabulary(tok);
  const std::vector<std::string> prefixes = {"",
                                             "{",
                                             R"({"ke)",
                                             R"({"key")",
                                             R"({"key": )",
                                             R"({"key": 12)",
                                             R"({"key": 1.)",
                                             R"({"key": -0.5e)",
                                             R"({"key": "caf)",
                                             R"({"k": [tr)",
                                             R"({"k": "\u00)",
                                             R"({"k": "\uD83D)",
                                             R"({"k": [1, {"x": "y"})",
                                             "{\n  \"a\": [\n    "};
  for (const std::string& prefix : prefixes) {
    // The prefix as the model would write it: its tokens' bytes (maybe a leading space).
    JsonConstraint c(vocab, JsonSchema::any_object());
    JsonPrefix p;
    for (int32_t id : tok.encode(prefix, false, false)) {
      ASSERT_TRUE(p.feed_all(vocab->pieces[static_cast<size_t>(id)])) << prefix;
      c.advance(id);
    }
    std::vector<float> logits(static_cast<size_t>(tok.vocab_size()) + 3, 0.0f);
    c.mask(logits);
    int64_t allowed = 0;
    for (size_t id = 0; id < logits.size(); ++id) {
      const bool want =
          id < vocab->pieces.size() && !vocab->pieces[id].empty() && p.accepts(vocab->pieces[id]);
      ASSERT_EQ(!std::isinf(logits[id]), want) << "prefix '" << prefix << "' token " << id;
      allowed += want;
    }
    EXPECT_GT(allowed, 0) << prefix;
  }
}

TEST(JsonConstraint, MaskAllowsExactlyTheTokensThatContinue) {
  auto engine = test::open_bundled_model(256);
  expect_mask_matches(load_tokenizer(engine->spec()));
}

// A byte-level BPE vocabulary (GPT-2's 50257 tokens, many of them JSON punctuation runs).
TEST(JsonConstraint, MaskMatchesOnAByteLevelVocabulary) {
  const std::string path = test::shared_path("fixtures/vocab/ggml-vocab-gpt-2.gguf");
  TS_REQUIRE_SHARED(path);
  expect_mask_matches(Tokenizer::from_gguf(*GgufFile::open(path)));
}

// JSON mode on the bundled model (a base model that never saw JSON): whatever it would say, the
// text is one object, and the closing brace ends the generation.
TEST(JsonConstraint, GenerationGivesOneObject) {
  auto engine = test::open_bundled_model(256);
  const Tokenizer tok = load_tokenizer(engine->spec());
  const std::vector<int32_t> prompt = tok.encode("The children walked to", tok.add_bos(), false);
  for (const float temperature : {0.0f, 0.8f, 1.5f})
    for (const uint64_t seed : {1u, 2u, 3u}) {
      Session session(*engine);
      GenerateOptions o;
      o.max_tokens = 200;
      o.json = JsonSchema::any_object();
      o.sampling.temperature = temperature;
      o.sampling.seed = seed;
      const GenerateResult r = generate(session, tok, prompt, o, [](const std::string&) {});
      const std::string what = "temperature " + std::to_string(temperature) + " seed " +
                               std::to_string(seed) + ": " + r.text;
      if (r.finish == FinishReason::Length) {
        EXPECT_EQ(accepted(r.text), r.text.size()) << what;  // cut short: a prefix of one
        continue;
      }
      EXPECT_EQ(r.finish, FinishReason::Stop) << what;
      EXPECT_TRUE(complete(r.text)) << what;
      const nlohmann::json j = nlohmann::json::parse(r.text, nullptr, false);
      EXPECT_TRUE(j.is_object()) << what;
      if (temperature == 0.0f) break;  // greedy: one seed is enough
    }
}

}  // namespace
}  // namespace ts
