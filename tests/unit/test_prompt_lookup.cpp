// Prompt lookup decoding: the draft is what followed the latest earlier occurrence of the longest
// repeated suffix; generating with it gives the tokens generating without it gives (greedy and
// sampled, free text and JSON mode) and leaves the session where generating without it leaves it.
//
// "The same" up to rounding: a guessed token's logits come from a row of a multi-row pass, which
// the bundled model (q8_0, routed experts) computes with other kernels than a one-row pass; the
// cases below were checked to stay clear of ties. A sampled later turn is not compared: there the
// rows' rounding (different expert picks on near ties: logits differ by up to ~0.03) can move a
// draw across a boundary, which greedy decoding never is this close to here.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "constrain/json_schema.h"
#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/model_tokenizer.h"
#include "runtime/prompt_lookup.h"
#include "runtime/session.h"
#include "test_paths.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

using Tokens = std::vector<int32_t>;

// Text the bundled model's greedy JSON answers repeat themselves after: guesses get taken.
constexpr const char* kRepeatingText =
    "One little cat sat on the mat. Two little cats sat on the mat. Three little cats sat on";

TEST(LookupDraft, FollowsTheLatestLongestEarlierMatch) {
  // Suffix 7 8 9: 8 9 occurs at 1-2 (then 5 6), 7 8 9 at 5-7... the longest wins, then the latest.
  EXPECT_EQ(lookup_draft(Tokens{1, 8, 9, 5, 6, 7, 8, 9, 4, 2, 7, 8, 9}, 3), (Tokens{4, 2, 7}));
  // Two matches of the same length: the later one.
  EXPECT_EQ(lookup_draft(Tokens{3, 4, 10, 3, 4, 11, 3, 4}, 5), (Tokens{11, 3, 4}));
  // At most max_tokens, and no more than the history holds after the match.
  EXPECT_EQ(lookup_draft(Tokens{3, 4, 10, 11, 12, 3, 4}, 2), (Tokens{10, 11}));
  EXPECT_EQ(lookup_draft(Tokens{5, 3, 4, 3, 4}, 8), (Tokens{3, 4}));
}

TEST(LookupDraft, NothingWithoutARepeatedPairOrRoom) {
  EXPECT_TRUE(lookup_draft(Tokens{1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(lookup_draft(Tokens{7, 1, 2, 7}, 4).empty());  // one token repeated: too weak
  EXPECT_TRUE(lookup_draft(Tokens{1, 2, 9, 1, 2}, 0).empty());
  EXPECT_TRUE(lookup_draft(Tokens{}, 4).empty());
  EXPECT_TRUE(lookup_draft(Tokens{4, 4}, 4).empty());
  // The suffix itself is not an earlier occurrence; overlapping ones are.
  EXPECT_EQ(lookup_draft(Tokens{6, 6, 6}, 4), (Tokens{6}));
}

struct Generated {
  GenerateResult r;
  int64_t n_past = 0;
  Tokens next_turn;  // a second turn in the same session, greedy
};

Generated generate_twice(Engine& engine, const Tokenizer& tok, const Tokens& prompt,
                         GenerateOptions o) {
  Session session(engine);
  Generated g;
  g.r = generate(session, tok, prompt, o, [](const std::string&) {});
  g.n_past = session.n_past();
  o.max_tokens = 24;
  o.sampling.temperature = 0;
  g.next_turn =
      generate(session, tok, tok.encode(" and then", false, false), o, [](const std::string&) {
      }).tokens;
  return g;
}

TEST(PromptLookup, SameTokensAndSessionAsWithout) {
  auto engine = test::open_bundled_model(512);
  const Tokenizer tok = load_tokenizer(engine->spec());
  const Tokens prompt = tok.encode(kRepeatingText, tok.add_bos(), false);
  int64_t matched = 0;
  for (const float temperature : {0.0f, 0.7f, 1.0f})
    for (const bool json : {false, true}) {
      GenerateOptions o;
      o.max_tokens = 120;
      o.sampling.temperature = temperature;
      o.sampling.seed = 7;
      if (json) o.json = JsonSchema::any_object();
      const Generated plain = generate_twice(*engine, tok, prompt, o);
      for (const int64_t lookup : {1, 4, 10}) {
        o.lookup = lookup;
        const Generated fast = generate_twice(*engine, tok, prompt, o);
        const std::string what = "temperature " + std::to_string(temperature) +
                                 (json ? ", JSON" : "") + ", lookup " + std::to_string(lookup);
        EXPECT_EQ(fast.r.tokens, plain.r.tokens) << what;
        EXPECT_EQ(fast.r.text, plain.r.text) << what;
        EXPECT_EQ(fast.r.finish, plain.r.finish) << what;
        EXPECT_EQ(fast.n_past, plain.n_past) << what;
        if (temperature == 0) {
          EXPECT_EQ(fast.next_turn, plain.next_turn) << what;
        }
        EXPECT_LE(fast.r.passes, plain.r.passes) << what;
        EXPECT_LE(fast.r.draft_matched, fast.r.drafted) << what;
        matched += fast.r.draft_matched;
      }
    }
  EXPECT_GT(matched, 0) << "no guess was ever taken: the test checks nothing";
}

// The answer ends inside a draft (a stop string, the token limit): the same tokens, and the rows
// of the draft after the end are forgotten.
TEST(PromptLookup, EndsWithinADraft) {
  auto engine = test::open_bundled_model(512);
  const Tokenizer tok = load_tokenizer(engine->spec());
  const Tokens prompt = tok.encode("a b c d a b c d a b c d a b", tok.add_bos(), false);
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.json = JsonSchema::any_object();  // the bundled model repeats itself in JSON, not in prose
  o.max_tokens = 40;
  const std::string text = generate_twice(*engine, tok, prompt, o).r.text;
  ASSERT_GT(text.size(), 12u);
  const auto expect_same = [&](const GenerateOptions& base, const std::string& what) {
    GenerateOptions with = base;
    with.lookup = 6;
    const Generated plain = generate_twice(*engine, tok, prompt, base);
    const Generated fast = generate_twice(*engine, tok, prompt, with);
    EXPECT_EQ(fast.r.tokens, plain.r.tokens) << what;
    EXPECT_EQ(fast.r.text, plain.r.text) << what;
    EXPECT_EQ(fast.n_past, plain.n_past) << what;
    EXPECT_EQ(fast.next_turn, plain.next_turn) << what;
    return fast.r.drafted;
  };
  int64_t drafted = 0;
  for (const int64_t max_tokens : {1, 2, 3, 7, 40}) {
    o.max_tokens = max_tokens;
    drafted += expect_same(o, "max_tokens " + std::to_string(max_tokens));
  }
  o.max_tokens = 40;
  for (const size_t at : {size_t{4}, text.size() / 2, text.size() - 3}) {
    o.stop = {text.substr(at, 3)};
    drafted += expect_same(o, "stop '" + o.stop[0] + "'");
  }
  EXPECT_GT(drafted, 0) << "nothing was guessed: the test checks nothing";
}

// A chat's second turn: guesses come from the earlier turns too (GenerateOptions::earlier), and
// the answer is still the one without lookup.
TEST(PromptLookup, SearchesEarlierTurns) {
  auto engine = test::open_bundled_model(512);
  const Tokenizer tok = load_tokenizer(engine->spec());
  const Tokens first = tok.encode(kRepeatingText, tok.add_bos(), false);
  const Tokens second = tok.encode(" Then", false, false);
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.json = JsonSchema::any_object();
  o.max_tokens = 60;
  const auto second_turn = [&](int64_t lookup, bool with_earlier) {
    Session session(*engine);
    const GenerateResult r1 = generate(session, tok, first, o, [](const std::string&) {});
    Tokens held = first;
    held.insert(held.end(), r1.tokens.begin(), r1.tokens.end() - 1);
    GenerateOptions o2 = o;
    o2.lookup = lookup;
    if (with_earlier) o2.earlier = held;
    return generate(session, tok, second, o2, [](const std::string&) {});
  };
  const GenerateResult plain = second_turn(0, false);
  const GenerateResult alone = second_turn(8, false);
  const GenerateResult chat = second_turn(8, true);
  EXPECT_EQ(chat.tokens, plain.tokens);
  EXPECT_EQ(alone.tokens, plain.tokens);
  EXPECT_GT(chat.drafted, alone.drafted) << "the earlier turn gave no more guesses";
}

}  // namespace
}  // namespace ts
