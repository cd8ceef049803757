// A hybrid model's recurrent (Gated DeltaNet) state cannot be cut back to a prefix as KV rows can:
// a sequence returns to a checkpoint and the tokens after it are fed again. Each way back must
// give the bits of a sequence that never went further: a rejected guess (rewind to the checkpoint
// before it), a position with no checkpoint (recomputed from the start), rows copied from another
// sequence (its state at a checkpoint, or its live state). And the state is in the footprint.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/generator.h"
#include "runtime/model_tokenizer.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

using Tokens = std::vector<int32_t>;

class RecurrentState : public ::testing::TestWithParam<test::FixtureForm> {
 protected:
  void SetUp() override {
    EngineOptions o;
    o.backend = "cpu";
    o.threads = 2;
    o.ctx = 128;
    o.kv_type = DType::F32;
    o.prefill_batch = 16;
    engine_ = Engine::open(GetParam().path, o);
    V_ = static_cast<size_t>(engine_->cfg().n_vocab);
    // The fixture's prompt, continued to 80 tokens by a fixed rule (some prompts have 24).
    ids_ = test::fixture_prompt(GetParam());
    for (size_t i = ids_.size(); i < 80; ++i)
      ids_.push_back(static_cast<int32_t>((37 * i + 11) % V_));
  }

  // The logits after feeding `prefix` (as one feed), then `more` (one feed), then `t`.
  std::vector<float> fed_straight(const Tokens& prefix, const Tokens& more, int32_t t) {
    Session s(*engine_);
    std::vector<float> out(V_ * std::max<size_t>(more.size(), 1));
    s.feed(prefix.data(), static_cast<int64_t>(prefix.size()), out.data(), false);
    if (!more.empty()) s.feed(more.data(), static_cast<int64_t>(more.size()), out.data(), false);
    s.feed(&t, 1, out.data(), false);
    out.resize(V_);
    return out;
  }

  static void expect_bits(const std::vector<float>& a, const std::vector<float>& b,
                          const std::string& what) {
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << what << ": " << test::compare_logits(a, b, static_cast<int64_t>(a.size())).summary();
  }

  std::unique_ptr<Engine> engine_;
  Tokens ids_;
  size_t V_ = 0;
};

TEST_P(RecurrentState, RejectedGuessesLeaveNoTrace) {
  const Tokens prompt(ids_.begin(), ids_.begin() + 40);
  const Tokens guesses(ids_.begin() + 50, ids_.begin() + 56);
  for (size_t taken = 0; taken <= guesses.size(); ++taken) {
    Session s(*engine_);
    std::vector<float> out(V_ * guesses.size());
    s.feed(prompt.data(), static_cast<int64_t>(prompt.size()), out.data(), false);
    s.checkpoint();
    s.feed(guesses.data(), static_cast<int64_t>(guesses.size()), out.data(), true);
    s.truncate(static_cast<int64_t>(prompt.size() + taken));
    ASSERT_EQ(s.n_past(), static_cast<int64_t>(prompt.size() + taken));
    s.feed(&ids_[70], 1, out.data(), false);
    out.resize(V_);
    const Tokens kept(guesses.begin(), guesses.begin() + static_cast<ptrdiff_t>(taken));
    expect_bits(out, fed_straight(prompt, kept, ids_[70]),
                std::to_string(taken) + " of the guesses taken");
  }
}

TEST_P(RecurrentState, WithoutACheckpointTheRowsAreComputedAgain) {
  const Tokens all(ids_.begin(), ids_.begin() + 60);
  Session s(*engine_);
  std::vector<float> out(V_);
  s.feed(all.data(), static_cast<int64_t>(all.size()), out.data(), false);
  s.truncate(37);  // no checkpoint: back to the empty state, 37 tokens fed again (16 + 16 + 5)
  ASSERT_EQ(s.n_past(), 37);
  s.feed(&ids_[70], 1, out.data(), false);
  expect_bits(out, fed_straight(Tokens(all.begin(), all.begin() + 37), {}, ids_[70]),
              "truncated to 37 of 60");
}

TEST_P(RecurrentState, CopiedRowsCarryTheState) {
  Forward forward(*engine_, 16);
  const Tokens prompt(ids_.begin(), ids_.begin() + 30);
  Tokens seq = prompt;  // what `from` holds: the prompt, a checkpoint, one token more
  seq.push_back(ids_[40]);
  KvCache from(*engine_, 128);
  for (int64_t start = 0; start < 30; start += 16)
    forward.run({SeqChunk{&from, prompt.data() + start, std::min<int64_t>(16, 30 - start)}});
  from.checkpoint();  // at 30
  forward.run({SeqChunk{&from, &seq[30], 1}});
  std::vector<float> got(V_);
  // Rows 30 (a checkpoint), 31 (the live state) and 20 (neither: the empty state, rows fed again).
  for (const int64_t rows : {30, 31, 20}) {
    KvCache to(*engine_, 128);
    const int64_t copied = to.copy_rows_from(from, rows);
    EXPECT_EQ(copied, rows == 20 ? 0 : rows);
    EXPECT_EQ(to.n_past(), copied);
    for (int64_t start = copied; start < rows; start += 16)
      forward.run({SeqChunk{&to, seq.data() + start, std::min<int64_t>(16, rows - start)}});
    forward.run({SeqChunk{&to, &ids_[70], 1, got.data()}});
    const std::vector<float> want =
        rows == 31 ? fed_straight(prompt, Tokens{seq[30]}, ids_[70])
                   : fed_straight(Tokens(seq.begin(), seq.begin() + rows), {}, ids_[70]);
    expect_bits(got, want, std::to_string(rows) + " rows copied");
  }
}

TEST_P(RecurrentState, FootprintCountsTheStateAndItsCheckpoints) {
  const Footprint& f = engine_->footprint();
  const ArchConfig& c = engine_->cfg();
  EXPECT_GT(f.recurrent_state, 0u);
  EXPECT_EQ(f.recurrent_state, recurrent_state_bytes(c) * (1 + kDefaultStateCheckpoints));
  const KvCache kv(*engine_, 128);
  EXPECT_EQ(kv.bytes(), f.kv_cache + f.recurrent_state);
}

class RecurrentLookup : public RecurrentState {};

// Generation with prompt lookup on a hybrid model: its rejected guesses are rewound, so the session
// ends where generating without lookup leaves it, and a greedy next turn sees the same state.
TEST_P(RecurrentLookup, LeavesTheSessionAsWithout) {
  const Tokenizer tok = load_tokenizer(engine_->spec());
  // A prompt that repeats itself, so that guesses are made.
  Tokens prompt(ids_.begin(), ids_.begin() + 20);
  prompt.insert(prompt.end(), ids_.begin() + 1, ids_.begin() + 20);
  const auto run = [&](int64_t lookup) {
    Session s(*engine_);
    GenerateOptions o;
    o.max_tokens = 24;
    o.sampling.temperature = 0;
    o.ignore_eos = true;
    o.lookup = lookup;
    GenerateResult r = generate(s, tok, prompt, o, [](const std::string&) {});
    std::vector<float> next(V_);
    s.feed(&ids_[5], 1, next.data(), false);
    return std::make_tuple(r, s.n_past(), next);
  };
  const auto [plain, plain_past, plain_next] = run(0);
  const auto [fast, fast_past, fast_next] = run(4);
  EXPECT_GT(fast.drafted, 0) << "no guess was made: the test checks nothing";
  EXPECT_EQ(fast.tokens, plain.tokens);
  EXPECT_EQ(fast_past, plain_past);
  // The state after the answer: the same tokens fed, in passes of other sizes (rounding only).
  const auto c = test::compare_logits(fast_next, plain_next, static_cast<int64_t>(V_));
  EXPECT_LE(c.rel, 1e-5) << c.summary();
}

// Of the fixtures, only this random model's greedy answer repeats its prompt enough for guesses.
INSTANTIATE_TEST_SUITE_P(Hybrid, RecurrentLookup,
                         ::testing::ValuesIn(test::fixture_forms({"qwen3_5"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

INSTANTIATE_TEST_SUITE_P(Hybrid, RecurrentState,
                         ::testing::ValuesIn(test::fixture_forms({"qwen3_next", "qwen3_5",
                                                                  "qwen3_5_moe"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

}  // namespace
}  // namespace ts
