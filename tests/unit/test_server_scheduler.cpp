// The server's scheduler without HTTP, on the bundled model: each request's answer equals what
// `generate` gives the same prompt alone in a Session, whether it ran alone or batched with
// others (decode rows of several slots plus chunked prefills in one forward pass); stop strings,
// token and context limits end it as `generate` does; a full queue refuses; a cancelled request
// frees its slot; bad requests are refused at submission; a slot's cached rows serve a repeated
// prompt exactly and the next turn of a conversation without prefilling it again; prompt lookup
// gives a slot the answer `generate` gives with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <thread>

#include "core/error.h"
#include "runtime/generator.h"
#include "runtime/model_tokenizer.h"
#include "runtime/session.h"
#include "server/scheduler.h"
#include "test_paths.h"
#include "text/detokenizer.h"

namespace ts::server {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kCtx = 256;

// Batched rows are bit-close, not bit-identical, to a lone row: the f32 router matmul sums in an
// order that depends on the tile shape (so on the batch's row count), and the rounding of the
// q8_0 activations can turn such a 1e-7 difference into one of up to ~0.1 in the logits (0.097
// measured over 586 decode steps of this model). A batched greedy answer may therefore part from
// the lone one where the top two logits are that close, and nowhere else.
constexpr float kTieGap = 0.25f;

struct GreedyReference {
  std::string text;
  std::vector<std::string> prefix;  // the text shown after each step
  std::vector<float> gap;           // top-1 minus top-2 logit at each step
};

struct Answer {
  std::string text;
  FinishReason finish = FinishReason::Length;
  Usage usage;
  std::string error;
  std::vector<ToolCall> tool_calls;
};

// Collects a job's whole answer; fails the test when it does not finish within the timeout.
Answer wait(Job& job) {
  Answer a;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < deadline) {
    JobUpdate u = job.take(100ms);
    for (const std::string& p : u.pieces) a.text += p;
    if (u.done) {
      a.finish = u.finish;
      a.usage = u.usage;
      a.error = u.error;
      a.tool_calls = u.tool_calls;
      return a;
    }
  }
  ADD_FAILURE() << "the job did not finish";
  return a;
}

bool wait_idle(Scheduler& s) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    const SchedulerStats st = s.stats();
    if (st.slots_busy == 0 && st.queued == 0) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.backend = "cpu";
    o.threads = 2;
    o.ctx = kCtx;
    engine_ = Engine::open(test::repo_dir() + "/models/tiny-moe-q8_0.gguf", o).release();
    tok_ = new Tokenizer(load_tokenizer(engine_->spec()));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete engine_;
  }

  static GenRequest request(const std::string& prompt, int64_t max_tokens, float temperature = 0.0f,
                            uint64_t seed = 0) {
    GenRequest r;
    r.prompt = tok_->encode(prompt, tok_->add_bos(), false);
    r.max_tokens = max_tokens;
    r.sampling.temperature = temperature;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = seed;
    return r;
  }

  // The same request through the single-sequence path. The engine is not thread-safe: call it
  // only while no scheduler is running on it.
  static GenerateResult alone(const GenRequest& r, int64_t lookup = 0) {
    Session session(*engine_);
    GenerateOptions o;
    o.lookup = lookup;
    o.max_tokens = r.max_tokens;
    o.ignore_eos = r.ignore_eos;
    o.stop = r.stop;
    o.sampling = r.sampling;
    o.json = r.json;
    return generate(session, *tok_, r.prompt, o, [](const std::string&) {});
  }

  // A greedy answer alone, with the top-1 minus top-2 logit gap of each step.
  static GreedyReference greedy_alone(const GenRequest& r) {
    Session session(*engine_);
    std::vector<float> logits(static_cast<size_t>(engine_->cfg().n_vocab));
    session.feed(r.prompt.data(), static_cast<int64_t>(r.prompt.size()), logits.data(), false);
    TextStream stream(*tok_);
    GreedyReference ref;
    for (int64_t i = 0; i < r.max_tokens; ++i) {
      std::vector<int32_t> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + 2, order.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
               (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
      });
      const int32_t t = order[0];
      ref.gap.push_back(logits[static_cast<size_t>(t)] - logits[static_cast<size_t>(order[1])]);
      if (tok_->is_eog(t)) {
        ref.prefix.push_back(ref.text);
        break;
      }
      ref.text += stream.push(t);
      ref.prefix.push_back(ref.text);
      if (i + 1 < r.max_tokens) session.feed(&t, 1, logits.data(), false);
    }
    ref.text += stream.flush();
    return ref;
  }

  // Equal to the lone answer, or parted from it only at a step whose top two logits are within
  // kTieGap (at that step or the one before: a different token can still spell the same text).
  static void expect_same_or_tie(const Answer& got, const GreedyReference& ref,
                                 const std::string& what) {
    if (got.text == ref.text) return;
    size_t i = 0;
    while (i + 1 < ref.prefix.size() && got.text.starts_with(ref.prefix[i])) ++i;
    const float gap = std::min(ref.gap[i], i > 0 ? ref.gap[i - 1] : ref.gap[i]);
    EXPECT_LT(gap, kTieGap) << what << ": parted from the lone answer at step " << i
                            << ", where its top two logits are " << gap
                            << " apart\n got: " << got.text << "\nwant: " << ref.text;
  }

  static void expect_same(const Answer& got, const GenerateResult& want, const std::string& what) {
    EXPECT_EQ(got.error, "") << what;
    EXPECT_EQ(got.text, want.text) << what;
    EXPECT_EQ(got.finish, want.finish) << what;
    EXPECT_EQ(got.usage.prompt_tokens, want.prompt_tokens) << what;
    EXPECT_EQ(got.usage.completion_tokens, static_cast<int64_t>(want.tokens.size())) << what;
  }

  // The checks of the tests below (RepeatedPromptComesFromTheCache,
  // SamePromptTogetherIsPrefilledOnce), for either model.
  static void expect_repeats_from_the_cache(const GenRequest& r);
  static void expect_prefilled_once(const std::vector<GenRequest>& reqs);

  static Engine* engine_;
  static Tokenizer* tok_;
};

Engine* SchedulerTest::engine_ = nullptr;
Tokenizer* SchedulerTest::tok_ = nullptr;

TEST_F(SchedulerTest, OneRequestEqualsGenerate) {
  const GenRequest r = request("Once upon a time", 24);
  const GenerateResult want = alone(r);
  Scheduler s(*engine_, *tok_, {2, kCtx, 64, 4});
  auto job = s.submit(r);
  ASSERT_NE(job, nullptr);
  expect_same(wait(*job), want, "greedy");
  EXPECT_TRUE(wait_idle(s));
}

TEST_F(SchedulerTest, SampledRequestEqualsGenerate) {
  const GenRequest r = request("The cat sat on", 30, 0.8f, 7);
  const GenerateResult want = alone(r);
  Scheduler s(*engine_, *tok_, {2, kCtx, 64, 4});
  auto job = s.submit(r);
  ASSERT_NE(job, nullptr);
  expect_same(wait(*job), want, "sampled");
}

TEST_F(SchedulerTest, BatchedRequestsEqualEachAlone) {
  // Three slots, six requests: decode rows of up to three sequences share each forward pass, and
  // the long prompt (more than the 16 rows of a step) is prefilled in chunks between them. The
  // sampled requests run alongside; their draws are checked alone (SampledRequestEqualsGenerate).
  Scheduler s(*engine_, *tok_, {3, kCtx, 16, 8});
  std::string long_prompt;
  for (int i = 0; i < 12; ++i)
    long_prompt += "The little dog ran to the park and played with a ball. ";
  const std::vector<GenRequest> reqs = {request("Once upon a time", 40),
                                        request("The cat sat on", 30, 0.8f, 7),
                                        request(long_prompt, 20),
                                        request("One day, a girl named Lily", 35, 1.0f, 42),
                                        request("Tom and his mom went", 25),
                                        request("The sun was", 1)};
  ASSERT_GT(reqs[2].prompt.size(), 16u * 3);
  std::vector<GreedyReference> want(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i)
    if (reqs[i].sampling.temperature == 0.0f) want[i] = greedy_alone(reqs[i]);
  std::vector<std::shared_ptr<Job>> jobs;
  for (const GenRequest& r : reqs) {
    jobs.push_back(s.submit(r));
    ASSERT_NE(jobs.back(), nullptr);
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Answer a = wait(*jobs[i]);
    const std::string what = "request " + std::to_string(i);
    EXPECT_EQ(a.error, "") << what;
    EXPECT_EQ(a.usage.prompt_tokens, static_cast<int64_t>(reqs[i].prompt.size())) << what;
    EXPECT_TRUE(a.finish == FinishReason::Stop ? a.usage.completion_tokens < reqs[i].max_tokens
                                               : a.usage.completion_tokens == reqs[i].max_tokens)
        << what;
    if (reqs[i].sampling.temperature == 0.0f) expect_same_or_tie(a, want[i], what);
  }
  EXPECT_TRUE(wait_idle(s));
  const SchedulerStats st = s.stats();
  // Batching happened: fewer forward passes than rows.
  EXPECT_LT(st.steps, st.decode_rows + st.prefill_rows);
}

TEST_F(SchedulerTest, StopStringEndsAsGenerateDoes) {
  const GenerateResult full = alone(request("Once upon a time", 24));
  // A word from the middle of the greedy answer: the answer must end just before it.
  const size_t at = full.text.find(' ', full.text.size() / 2);
  ASSERT_NE(at, std::string::npos);
  const std::string stop = full.text.substr(at, 4);
  GenRequest r = request("Once upon a time", 24);
  r.stop = {"never appears", stop};
  const GenerateResult want = alone(r);
  Scheduler s(*engine_, *tok_, {1, kCtx, 64, 4});
  auto job = s.submit(r);
  ASSERT_NE(job, nullptr);
  const Answer a = wait(*job);
  expect_same(a, want, "stop");
  EXPECT_EQ(a.finish, FinishReason::Stop);
  EXPECT_EQ(a.text, full.text.substr(0, full.text.find(stop)));
}

TEST_F(SchedulerTest, ContextLimitEndsWithLength) {
  // Slots of 16 tokens, run past the end of text: the answer stops when the cache is full.
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 16;
  auto small = Engine::open(test::repo_dir() + "/models/tiny-moe-q8_0.gguf", o);
  GenRequest r = request("Once upon a time there was", -1);
  r.ignore_eos = true;
  Session session(*small);
  GenerateOptions g;
  g.max_tokens = -1;
  g.ignore_eos = true;
  g.sampling = r.sampling;
  const GenerateResult want = generate(session, *tok_, r.prompt, g, [](const std::string&) {});
  Scheduler s(*small, *tok_, {1, 16, 64, 4});
  auto job = s.submit(r);
  ASSERT_NE(job, nullptr);
  const Answer a = wait(*job);
  expect_same(a, want, "context");
  EXPECT_EQ(a.finish, FinishReason::Length);
  EXPECT_EQ(a.usage.prompt_tokens + a.usage.completion_tokens, 16);
}

TEST_F(SchedulerTest, FullQueueRefuses) {
  Scheduler s(*engine_, *tok_, {1, kCtx, 64, 1});
  GenRequest r = request("Once upon a time", -1);
  r.ignore_eos = true;
  auto a = s.submit(r);
  auto b = s.submit(r);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(s.submit(r), nullptr);  // one running (or about to), one waiting: no room for a third
  a->cancel();
  b->cancel();
  EXPECT_TRUE(wait_idle(s));
  auto c = s.submit(request("Once upon a time", 4));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(wait(*c).usage.completion_tokens, 4);
}

TEST_F(SchedulerTest, CancelFreesTheSlot) {
  const GenRequest next = request("The cat sat on", 12);
  const GenerateResult want = alone(next);
  Scheduler s(*engine_, *tok_, {2, kCtx, 64, 4});
  GenRequest r = request("Once upon a time", -1);
  r.ignore_eos = true;
  auto job = s.submit(r);
  ASSERT_NE(job, nullptr);
  JobUpdate u;
  while (u.pieces.empty() && !u.done) u = job->take(100ms);
  ASSERT_FALSE(u.done);
  EXPECT_EQ(s.stats().slots_busy, 1);
  job->cancel();
  EXPECT_TRUE(wait_idle(s));
  // The freed slot serves the next request as if it were new.
  auto again = s.submit(next);
  ASSERT_NE(again, nullptr);
  expect_same(wait(*again), want, "after cancel");
}

// A logit bias steers a request as it steers generate: banning each greedy token the answer
// would take makes the request answer with other tokens, and a large bias on one token makes it
// the answer.
TEST_F(SchedulerTest, LogitBiasBansAndForcesTokens) {
  GenRequest r = request("Once upon a time", 6);
  const GenerateResult free_run = alone(r);
  ASSERT_FALSE(free_run.tokens.empty());
  for (int32_t t : free_run.tokens) r.sampling.logit_bias.emplace_back(t, -100.0f);
  const GenerateResult banned = alone(r);
  for (int32_t t : banned.tokens)
    EXPECT_EQ(std::count(free_run.tokens.begin(), free_run.tokens.end(), t), 0) << t;
  GenRequest forced = request("Once upon a time", 3);
  forced.sampling.logit_bias = {{300, 100.0f}};
  const GenerateResult want = alone(forced);
  EXPECT_EQ(want.tokens, (std::vector<int32_t>{300, 300, 300}));
  Scheduler s(*engine_, *tok_, {2, kCtx, 64, 4});
  for (const auto& [q, lone] : {std::pair{r, banned}, std::pair{forced, want}}) {
    auto job = s.submit(q);
    ASSERT_NE(job, nullptr);
    expect_same(wait(*job), lone, "biased");
  }
}

// JSON mode through the scheduler, beside a plain request: each answer equals generate's alone,
// and the greedy JSON one is a whole object (the bundled model closes it at once after this
// prompt; the sampled one writes a long string).
TEST_F(SchedulerTest, JsonModeEqualsGenerate) {
  GenRequest json = request("Once upon a time", 120);
  json.json = JsonSchema::any_object();
  GenRequest sampled = json;
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 11;
  const std::vector<GenRequest> reqs = {json, sampled, request("Once upon a time", 20)};
  std::vector<GenerateResult> want;
  for (const GenRequest& q : reqs) want.push_back(alone(q));
  EXPECT_EQ(want[0].finish, FinishReason::Stop);
  EXPECT_TRUE(nlohmann::json::parse(want[0].text, nullptr, false).is_object()) << want[0].text;
  Scheduler s(*engine_, *tok_, {3, kCtx, 64, 4});
  std::vector<std::shared_ptr<Job>> jobs;
  for (const GenRequest& q : reqs) jobs.push_back(s.submit(q));
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_NE(jobs[i], nullptr);
    expect_same(wait(*jobs[i]), want[i], "request " + std::to_string(i));
  }
}

// With prompt lookup, a slot's passes are those of `generate` with it (the sampled token and the
// same guesses), so a request alone gets generate's answer bit for bit, JSON mode, stop strings
// and limits included, and the cache keeps only the rows of the answer; requests that share
// passes with others differ from their lone answers only at near ties.
TEST_F(SchedulerTest, LookupAnswersAsGenerateDoes) {
  constexpr int64_t kLookup = 6;
  GenRequest json = request(
      "One little cat sat on the mat. Two little cats sat on the mat. Three little cats sat on",
      100);
  json.json = JsonSchema::any_object();
  GenRequest sampled = json;
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 11;
  GenRequest stopped = json;
  const std::string full = alone(json, kLookup).text;
  stopped.stop = {full.substr(full.size() / 2, 3)};
  GenRequest short_json = json;
  short_json.max_tokens = 9;
  const std::vector<GenRequest> reqs = {json, sampled, stopped, short_json,
                                        request("Once upon a time", 30)};
  std::vector<GenerateResult> want;
  for (const GenRequest& q : reqs) want.push_back(alone(q, kLookup));
  Scheduler s(*engine_, *tok_, {2, kCtx, 64, 4, kLookup});
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto job = s.submit(reqs[i]);
    ASSERT_NE(job, nullptr);
    expect_same(wait(*job), want[i], "request " + std::to_string(i));
    // The next request must not find this one's untaken guesses among the slot's rows: its
    // repeat, served from the cache, gives the same answer again.
    auto again = s.submit(reqs[i]);
    ASSERT_NE(again, nullptr);
    expect_same(wait(*again), want[i], "request " + std::to_string(i) + " again");
  }
  const SchedulerStats st = s.stats();
  EXPECT_GT(st.draft_matched, 0u) << "no guess was taken: the test checks nothing";
  EXPECT_LE(st.draft_matched, st.drafted);
  // Together: each slot's guesses are rows of the same passes as the other's.
  const std::vector<GenRequest> pair = {request("Once upon a time", 40),
                                        request("Tom and his mom went", 30)};
  std::vector<GreedyReference> lone;
  for (const GenRequest& q : pair) lone.push_back(greedy_alone(q));
  std::vector<std::shared_ptr<Job>> jobs;
  for (const GenRequest& q : pair) jobs.push_back(s.submit(q));
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_NE(jobs[i], nullptr);
    expect_same_or_tie(wait(*jobs[i]), lone[i], "together " + std::to_string(i));
  }
}

// Prompt rows and prefill rows one request added to the scheduler's counts.
struct RowsSpent {
  uint64_t prefilled = 0, cached = 0;
};

RowsSpent rows_spent(Scheduler& s, const SchedulerStats& before) {
  EXPECT_TRUE(wait_idle(s));
  const SchedulerStats after = s.stats();
  return {after.prefill_rows - before.prefill_rows, after.cached_rows - before.cached_rows};
}

// A finished request leaves its rows and its prompt's logits in its slot: the same prompt again
// (sampled, same seed) is answered without a forward pass over it, bit for bit as the first time.
void SchedulerTest::expect_repeats_from_the_cache(const GenRequest& r) {
  const GenerateResult want = alone(r);
  const auto n = static_cast<int64_t>(r.prompt.size());
  Scheduler s(*engine_, *tok_, {2, kCtx, 64, 4});
  for (int turn = 0; turn < 3; ++turn) {
    const SchedulerStats before = s.stats();
    auto job = s.submit(r);
    ASSERT_NE(job, nullptr);
    const Answer a = wait(*job);
    const std::string what = "turn " + std::to_string(turn);
    expect_same(a, want, what);
    EXPECT_EQ(a.usage.cached_tokens, turn == 0 ? 0 : n) << what;
    const RowsSpent spent = rows_spent(s, before);
    EXPECT_EQ(spent.prefilled, turn == 0 ? static_cast<uint64_t>(n) : 0u) << what;
    EXPECT_EQ(spent.cached, turn == 0 ? 0u : static_cast<uint64_t>(n)) << what;
  }
}

TEST_F(SchedulerTest, RepeatedPromptComesFromTheCache) {
  expect_repeats_from_the_cache(request("The cat sat on", 20, 0.8f, 7));
}

// Requests with one prompt at once (the `n` choices of a request): the first prefills it, the
// others wait for its rows and copy them (and its logits) into their slots, each answer still
// its lone one bit for bit; the prompt is prefilled once.
void SchedulerTest::expect_prefilled_once(const std::vector<GenRequest>& reqs) {
  const auto n = static_cast<int64_t>(reqs[0].prompt.size());
  std::vector<GenerateResult> want;
  for (const GenRequest& r : reqs) want.push_back(alone(r));
  Scheduler s(*engine_, *tok_, {3, kCtx, 64, 4});
  const SchedulerStats before = s.stats();
  std::vector<std::shared_ptr<Job>> jobs;
  for (const GenRequest& r : reqs) jobs.push_back(s.submit(r));
  std::set<std::string> texts;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_NE(jobs[i], nullptr);
    const Answer a = wait(*jobs[i]);
    expect_same(a, want[i], "request " + std::to_string(i));
    EXPECT_EQ(a.usage.cached_tokens, i == 0 ? 0 : n) << i;
    texts.insert(a.text);
  }
  EXPECT_GT(texts.size(), 1u) << "three seeds gave one text: the draws were not each request's";
  const RowsSpent spent = rows_spent(s, before);
  EXPECT_EQ(spent.prefilled, static_cast<uint64_t>(n));
  EXPECT_EQ(spent.cached, 2 * static_cast<uint64_t>(n));
}

TEST_F(SchedulerTest, SamePromptTogetherIsPrefilledOnce) {
  std::vector<GenRequest> reqs;
  for (uint64_t seed : {7u, 8u, 9u})
    reqs.push_back(request("The cat sat on the mat and", 20, 0.9f, seed));
  expect_prefilled_once(reqs);
}

// The next turn of a conversation (the first prompt, the answer's tokens, new text) prefills only
// the new tokens; its answer is the lone one up to the batch-shape ties of kTieGap, since the
// answer's rows were computed one at a time rather than in the new prompt's chunk.
TEST_F(SchedulerTest, ContinuedConversationPrefillsOnlyWhatIsNew) {
  GenRequest first = request("Once upon a time", 12);
  first.ignore_eos = true;
  const GenerateResult answer = alone(first);
  ASSERT_EQ(answer.tokens.size(), 12u);
  GenRequest next = request("", 16);
  next.prompt = first.prompt;
  next.prompt.insert(next.prompt.end(), answer.tokens.begin(), answer.tokens.end());
  const std::vector<int32_t> more = tok_->encode(" Then the dog said", false, false);
  next.prompt.insert(next.prompt.end(), more.begin(), more.end());
  const GreedyReference want = greedy_alone(next);
  Scheduler s(*engine_, *tok_, {2, kCtx, 64, 4});
  auto job = s.submit(first);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(wait(*job).text, answer.text);
  const SchedulerStats before = s.stats();
  job = s.submit(next);
  ASSERT_NE(job, nullptr);
  const Answer a = wait(*job);
  // Every row but the last sampled token's, which was never fed.
  const auto kept = static_cast<int64_t>(first.prompt.size() + answer.tokens.size() - 1);
  EXPECT_EQ(a.usage.cached_tokens, kept);
  EXPECT_EQ(a.usage.prompt_tokens, static_cast<int64_t>(next.prompt.size()));
  const RowsSpent spent = rows_spent(s, before);
  EXPECT_EQ(spent.prefilled, next.prompt.size() - static_cast<uint64_t>(kept));
  EXPECT_EQ(spent.cached, static_cast<uint64_t>(kept));
  expect_same_or_tie(a, want, "next turn");
}

// Two conversations on two slots keep their caches: a prompt that shares only its first token
// with a slot goes to the other, free, slot and starts fresh, so coming back to either
// conversation finds its rows. With cache_prompt off a request prefills its whole prompt and
// gets the lone answer bit for bit.
TEST_F(SchedulerTest, EachPromptReturnsToItsSlot) {
  const GenRequest a = request("Once upon a time", 8);
  const GenRequest b = request("Tom and his mom went", 8);
  ASSERT_EQ(a.prompt[0], b.prompt[0]);
  const GenerateResult want_a = alone(a), want_b = alone(b);
  Scheduler s(*engine_, *tok_, {2, kCtx, 64, 4});
  const std::vector<std::pair<const GenRequest*, const GenerateResult*>> order = {
      {&a, &want_a}, {&b, &want_b}, {&a, &want_a}, {&b, &want_b}};
  for (size_t i = 0; i < order.size(); ++i) {
    auto job = s.submit(*order[i].first);
    ASSERT_NE(job, nullptr);
    const Answer got = wait(*job);
    expect_same(got, *order[i].second, "request " + std::to_string(i));
    EXPECT_EQ(got.usage.cached_tokens, i < 2 ? 0 : got.usage.prompt_tokens) << i;
  }
  GenRequest fresh = a;
  fresh.cache_prompt = false;
  const SchedulerStats before = s.stats();
  auto job = s.submit(fresh);
  ASSERT_NE(job, nullptr);
  const Answer got = wait(*job);
  expect_same(got, want_a, "cache_prompt off");
  EXPECT_EQ(got.usage.cached_tokens, 0);
  EXPECT_EQ(rows_spent(s, before).prefilled, a.prompt.size());
}

// A required tool call (the prompt ends with the call's marker, as the server writes it): the
// answer is calls of declared tools whose arguments fit their schemas (exactly one without
// parallel calls), greedy and sampled, beside a plain request; no text is shown, and the finish
// reason says so.
TEST_F(SchedulerTest, RequiredToolCallIsOneValidCall) {
  const nlohmann::json params = nlohmann::json::parse(
      R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
          "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]})");
  const std::vector<Tool> defs = {
      {"forecast", "", params, std::make_shared<const JsonSchema>(JsonSchema::compile(params))},
      {"noop", "", nlohmann::json::object(), JsonSchema::any_object()}};
  std::vector<GenRequest> reqs;
  for (const bool parallel : {true, false}) {
    for (const float temperature : {0.0f, 0.9f}) {
      GenRequest r = request("Once upon a time <tool_call>\n", 200, temperature, 3);
      r.tools = std::make_shared<const ToolSet>(defs, parallel);
      r.tool_required = true;
      reqs.push_back(r);
    }
  }
  reqs.push_back(request("Once upon a time", 10));
  Scheduler s(*engine_, *tok_, {3, kCtx, 64, 8});
  std::vector<std::shared_ptr<Job>> jobs;
  for (const GenRequest& r : reqs) jobs.push_back(s.submit(r));
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_NE(jobs[i], nullptr);
    const Answer a = wait(*jobs[i]);
    EXPECT_EQ(a.error, "");
    EXPECT_EQ(a.text, "");
    ASSERT_EQ(a.finish, FinishReason::ToolCalls) << i;
    ASSERT_GE(a.tool_calls.size(), 1u);
    if (!reqs[i].tools->parallel()) {
      EXPECT_EQ(a.tool_calls.size(), 1u);
    }
    for (const ToolCall& call : a.tool_calls) {
      const auto args = nlohmann::json::parse(call.arguments);
      if (call.name == "forecast") {
        EXPECT_TRUE(args["city"].is_string() && args["days"].is_number_integer()) << args;
        EXPECT_GE(args["days"].get<int>(), 1);
        EXPECT_LE(args["days"].get<int>(), 7);
      } else {
        EXPECT_EQ(call.name, "noop");
        EXPECT_TRUE(args.is_object());
      }
    }
  }
  EXPECT_EQ(wait(*jobs[4]).tool_calls.size(), 0u);
}

// Parallel calls cut by max_tokens inside a later call: the whole calls before it are the
// answer's (finish reason length), never none.
TEST_F(SchedulerTest, CutInsideACallKeepsTheWholeCallsBefore) {
  const std::vector<Tool> defs = {{"noop", "", nlohmann::json::object(), JsonSchema::any_object()}};
  auto call_request = [&](int64_t max_tokens) {
    GenRequest r = request("Once upon a time <tool_call>\n", max_tokens);
    r.tools = std::make_shared<const ToolSet>(defs, true);
    r.tool_required = true;
    // End of text banned: after each call the answer can only go on with another.
    r.sampling.logit_bias = {{tok_->eos(), -100.0f}};
    return r;
  };
  Scheduler s(*engine_, *tok_, {1, kCtx, 64, 8});
  const auto run = [&](int64_t max_tokens) {
    auto job = s.submit(call_request(max_tokens));
    EXPECT_NE(job, nullptr);
    return wait(*job);
  };
  // The answer never ends by itself, so max_tokens cuts it inside a call.
  const Answer a = run(120);
  EXPECT_EQ(a.finish, FinishReason::Length);
  ASSERT_GE(a.tool_calls.size(), 2u);
  // Greedy: a shorter limit cuts the same answer earlier, keeping the calls whole by then.
  const Answer b = run(a.usage.completion_tokens / 2);
  EXPECT_EQ(b.finish, FinishReason::Length);
  ASSERT_GE(b.tool_calls.size(), 1u);
  ASSERT_LT(b.tool_calls.size(), a.tool_calls.size());
  for (size_t i = 0; i < b.tool_calls.size(); ++i) {
    EXPECT_EQ(b.tool_calls[i].name, a.tool_calls[i].name);
    EXPECT_EQ(b.tool_calls[i].arguments, a.tool_calls[i].arguments);
  }
}

TEST_F(SchedulerTest, BadRequestsAreRefusedAtSubmission) {
  Scheduler s(*engine_, *tok_, {1, 8, 64, 4});
  EXPECT_THROW(s.submit(GenRequest{}), Error);  // empty prompt
  GenRequest too_long = request("Once upon a time there was a little girl named Lily who", 4);
  ASSERT_GT(too_long.prompt.size(), 8u);
  EXPECT_THROW(s.submit(too_long), Error);
  GenRequest bad_id = request("Hi", 4);
  bad_id.prompt.push_back(static_cast<int32_t>(engine_->cfg().n_vocab));
  EXPECT_THROW(s.submit(bad_id), Error);
  GenRequest bad_top_p = request("Hi", 4);
  bad_top_p.sampling.top_p = 0.0f;
  EXPECT_THROW(s.submit(bad_top_p), Error);
  GenRequest bad_bias = request("Hi", 4);
  bad_bias.sampling.logit_bias = {{static_cast<int32_t>(engine_->cfg().n_vocab), 1.0f}};
  EXPECT_THROW(s.submit(bad_bias), Error);
  EXPECT_EQ(s.stats().queued, 0u);
}

}  // namespace
}  // namespace ts::server

namespace ts::server {
namespace {

// The same scheduler on a hybrid model (Qwen3.5 layout: three Gated DeltaNet layers, one gated
// attention layer, f32), whose recurrent state returns only to checkpoints: a repeated prompt and
// the next turn of a conversation resume from them, copies of another slot's prompt carry its
// state, and rejected lookup guesses are fed again before the next token.
class HybridSchedulerTest : public SchedulerTest {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.backend = "cpu";
    o.threads = 2;
    o.ctx = kCtx;
    o.kv_type = DType::F32;
    engine_ = Engine::open(test::fixtures_dir() + "/models/qwen3_5/model-f32.gguf", o).release();
    tok_ = new Tokenizer(load_tokenizer(engine_->spec()));
  }
};

TEST_F(HybridSchedulerTest, RepeatedPromptComesFromACheckpoint) {
  GenRequest r = request("The quick brown fox jumps over the lazy dog, and on", 12, 0.8f, 7);
  r.ignore_eos = true;
  expect_repeats_from_the_cache(r);
}

// The next turn resumes from the state where the answer ended.
TEST_F(HybridSchedulerTest, NextTurnResumesWhereTheAnswerEnded) {
  GenRequest r = request("The quick brown fox jumps over the lazy dog, and on", 12);
  r.ignore_eos = true;
  const GenerateResult first = alone(r);
  GenRequest next = request("", 8);
  next.prompt = r.prompt;
  next.prompt.insert(next.prompt.end(), first.tokens.begin(), first.tokens.end());
  const std::vector<int32_t> more = tok_->encode(" Then the dog said", false, false);
  next.prompt.insert(next.prompt.end(), more.begin(), more.end());
  const GreedyReference lone = greedy_alone(next);
  Scheduler s(*engine_, *tok_, {2, kCtx, 64, 4});
  auto job = s.submit(r);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(wait(*job).text, first.text);
  job = s.submit(next);
  ASSERT_NE(job, nullptr);
  const Answer a = wait(*job);
  EXPECT_EQ(a.usage.cached_tokens, static_cast<int64_t>(r.prompt.size() + first.tokens.size()) - 1);
  expect_same_or_tie(a, lone, "next turn");
}

TEST_F(HybridSchedulerTest, SamePromptTogetherIsPrefilledOnce) {
  std::vector<GenRequest> reqs;
  for (uint64_t seed : {7u, 8u, 9u}) {
    reqs.push_back(request("The cat sat on the mat and the dog sat on the", 10, 0.9f, seed));
    reqs.back().ignore_eos = true;
  }
  expect_prefilled_once(reqs);
}

TEST_F(HybridSchedulerTest, BatchedLookupAnswersAsAlone) {
  // Prompts that repeat themselves (the fixture's prompt's pieces, twice), so that this random
  // model's answers repeat parts of them and guesses are made.
  std::ifstream in(test::fixtures_dir() + "/models/qwen3_5/prompt.json");
  const auto ids = nlohmann::json::parse(in).at("prompt_ids").get<std::vector<int32_t>>();
  std::vector<GenRequest> pair;
  for (const size_t from : {size_t{1}, size_t{30}}) {
    GenRequest q = request("", 24);
    q.prompt.assign(ids.begin(), ids.begin() + 20);
    q.prompt.insert(q.prompt.end(), ids.begin() + static_cast<ptrdiff_t>(from),
                    ids.begin() + static_cast<ptrdiff_t>(from + 19));
    q.ignore_eos = true;
    pair.push_back(q);
  }
  std::vector<GreedyReference> lone;
  for (const GenRequest& q : pair) lone.push_back(greedy_alone(q));
  // Steps of 64 rows, and of 3, where the guesses compete with the other slot's rows.
  for (const int64_t batch_rows : {64, 3}) {
    Scheduler s(*engine_, *tok_, {2, kCtx, batch_rows, 4, 4});
    const std::string what = std::to_string(batch_rows) + " rows a step, ";
    std::vector<std::shared_ptr<Job>> jobs;
    for (const GenRequest& q : pair) jobs.push_back(s.submit(q));
    for (size_t i = 0; i < jobs.size(); ++i) {
      ASSERT_NE(jobs[i], nullptr);
      expect_same_or_tie(wait(*jobs[i]), lone[i], what + "together " + std::to_string(i));
    }
    // Each alone again: its repeat from the cache must not see another pass's rejected guesses.
    for (size_t i = 0; i < pair.size(); ++i) {
      auto job = s.submit(pair[i]);
      ASSERT_NE(job, nullptr);
      expect_same_or_tie(wait(*job), lone[i], what + "again " + std::to_string(i));
    }
    EXPECT_GT(s.stats().drafted, 0u) << what << "no guess was made: the test checks nothing";
  }
}

}  // namespace
}  // namespace ts::server
