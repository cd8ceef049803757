// Sampler: greedy and penalties with exact margins, top-k / top-p / min-p / temperature by what
// they allow and the frequencies they give (fixed seeds, so the counts are deterministic), seed
// reproducibility, the PRNG against an independent implementation of xoshiro256**, parameter
// checks; and the stop-string helper.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"
#include "text/rng.h"
#include "text/sampler.h"
#include "text/stop_strings.h"

namespace {

ts::SamplerParams plain(float temperature) {
  ts::SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::vector<int> histogram(ts::Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int> h(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++h[s.sample(logits)];
  return h;
}

TEST(Rng, MatchesReferenceXoshiro256StarStar) {
  // Values from an independent Python implementation of splitmix64 seeding + xoshiro256**.
  ts::Rng r(42);
  EXPECT_EQ(r.next(), 0x15780b2e0c2ec716ull);
  EXPECT_EQ(r.next(), 0x6104d9866d113a7eull);
  EXPECT_EQ(r.next(), 0xae17533239e499a1ull);
  for (int i = 0; i < 1000; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  ts::Sampler s(plain(0.0f));
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.0f, -2.0f, 3.0f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{-INFINITY, -5.0f}), 1);
}

TEST(Sampler, RepeatPenaltyDividesPositiveMultipliesNegative) {
  auto p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  ts::Sampler s(p);
  s.accept(0);
  EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.5f}), 1);    // 2.0 / 2 = 1.0 < 1.5
  EXPECT_EQ(s.sample(std::vector<float>{-1.0f, -1.5f}), 1);  // -1.0 * 2 = -2.0 < -1.5
  p.repeat_penalty = 1.2f;
  ts::Sampler mild(p);
  mild.accept(0);
  EXPECT_EQ(mild.sample(std::vector<float>{2.0f, 1.5f}), 0);  // 1.67 > 1.5
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
  auto p = plain(0.0f);
  p.presence_penalty = 0.3f;
  ts::Sampler presence(p);
  presence.accept(0);
  presence.accept(0);
  EXPECT_EQ(presence.sample(std::vector<float>{1.0f, 0.8f}), 1);   // 1.0 - 0.3 once
  EXPECT_EQ(presence.sample(std::vector<float>{1.0f, 0.65f}), 0);  // 0.7 > 0.65: not per occurrence
  p = plain(0.0f);
  p.frequency_penalty = 0.1f;
  ts::Sampler frequency(p);
  for (int i = 0; i < 3; ++i) frequency.accept(0);
  EXPECT_EQ(frequency.sample(std::vector<float>{1.0f, 0.75f}), 1);  // 1.0 - 3 * 0.1 = 0.7
  EXPECT_EQ(frequency.sample(std::vector<float>{1.0f, 0.65f}), 0);
}

// Biases add to the raw logits before the penalties; -100 (or -inf) bans a token outright, also
// from a draw at any temperature.
TEST(Sampler, LogitBiasShiftsAndBans) {
  auto p = plain(0.0f);
  p.logit_bias = {{1, 0.6f}};
  EXPECT_EQ(ts::Sampler(p).sample(std::vector<float>{2.0f, 1.5f}), 1);  // 1.5 + 0.6 > 2.0
  p.logit_bias = {{1, 0.4f}};
  EXPECT_EQ(ts::Sampler(p).sample(std::vector<float>{2.0f, 1.5f}), 0);
  p.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(ts::Sampler(p).sample(std::vector<float>{50.0f, -60.0f}), 1);  // -100 bans, not shifts
  p.logit_bias = {{1, 0.6f}};
  p.presence_penalty = 0.3f;
  ts::Sampler penalised(p);
  penalised.accept(1);
  EXPECT_EQ(penalised.sample(std::vector<float>{2.0f, 1.5f}), 0);  // 1.5 + 0.6 - 0.3 < 2.0
  auto q = plain(1.0f);
  q.seed = 3;
  q.logit_bias = {{0, -INFINITY}, {2, -100.0f}};
  ts::Sampler drawn(q);
  const std::vector<int> h = histogram(drawn, std::vector<float>{5.0f, 0.0f, 5.0f, 0.0f}, 2000);
  EXPECT_EQ(h[0], 0);
  EXPECT_EQ(h[2], 0);
  EXPECT_EQ(h[1] + h[3], 2000);
}

TEST(Sampler, PenaltyWindowForgetsOldTokens) {
  auto p = plain(0.0f);
  p.presence_penalty = 1.0f;
  p.penalty_last_n = 2;
  ts::Sampler s(p);
  s.accept(0);
  s.accept(1);
  s.accept(1);  // token 0 has left the window of 2
  EXPECT_EQ(s.sample(std::vector<float>{1.0f, 1.5f, 0.9f}), 0);
  s.clear_history();
  EXPECT_EQ(s.sample(std::vector<float>{1.0f, 1.5f, 0.9f}), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  const std::vector<float> logits = logits_of({0.2, 0.2, 0.2, 0.2, 0.2});
  auto p = plain(1.0f);
  p.seed = 1234;
  ts::Sampler a(p), b(p);
  p.seed = 1235;
  ts::Sampler c(p);
  std::vector<int32_t> sa, sb, sc;
  for (int i = 0; i < 200; ++i) {
    sa.push_back(a.sample(logits));
    sb.push_back(b.sample(logits));
    sc.push_back(c.sample(logits));
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(Sampler, TemperatureOneFollowsTheDistribution) {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  auto p = plain(1.0f);
  p.seed = 7;
  ts::Sampler s(p);
  const int draws = 40000;
  const std::vector<int> h = histogram(s, logits_of(probs), draws);
  for (size_t i = 0; i < probs.size(); ++i) {
    const double sd = std::sqrt(probs[i] * (1 - probs[i]) / draws);
    EXPECT_NEAR(h[i] / static_cast<double>(draws), probs[i], 5 * sd) << "token " << i;
  }
}

TEST(Sampler, LowTemperatureSharpensHighFlattens) {
  const std::vector<float> logits = logits_of({0.5, 0.3, 0.2});
  auto p = plain(0.1f);
  p.seed = 3;
  ts::Sampler cold(p);
  EXPECT_GT(histogram(cold, logits, 2000)[0], 1960);  // p(1)/p(0) = 0.6^10 = 0.6%
  p.temperature = 100.0f;
  ts::Sampler hot(p);
  const std::vector<int> h = histogram(hot, logits, 3000);
  for (int n : h) EXPECT_NEAR(n, 1000, 100);
}

TEST(Sampler, TopKTopPMinPCutTheTail) {
  const std::vector<float> logits = logits_of({0.5, 0.3, 0.15, 0.05});
  auto p = plain(1.0f);
  p.seed = 11;
  p.top_k = 2;
  ts::Sampler k(p);
  std::vector<int> h = histogram(k, logits, 3000);
  EXPECT_EQ(h[2] + h[3], 0);
  EXPECT_GT(h[1], 0);
  // Kept 0.5 and 0.3, renormalised: 0.625 / 0.375.
  EXPECT_NEAR(h[0] / 3000.0, 0.625, 0.04);

  p = plain(1.0f);
  p.top_p = 0.75f;  // 0.5 < 0.75 <= 0.8: tokens 0 and 1
  ts::Sampler tp(p);
  h = histogram(tp, logits, 3000);
  EXPECT_EQ(h[2] + h[3], 0);
  EXPECT_GT(h[1], 0);
  p.top_p = 0.5f;  // the best token alone reaches 0.5
  ts::Sampler tp1(p);
  EXPECT_EQ(histogram(tp1, logits, 500)[0], 500);

  p = plain(1.0f);
  p.min_p = 0.35f;  // keeps p >= 0.175: tokens 0 and 1
  ts::Sampler mp(p);
  h = histogram(mp, logits, 3000);
  EXPECT_EQ(h[2] + h[3], 0);
  EXPECT_GT(h[1], 0);
}

TEST(Sampler, TopPOnALargeVocabularyKeepsExactlyTheNucleus) {
  // 3000 logits spread over 10 units: the nucleus of 0.9 is hundreds of tokens, found by the
  // sampler without a full sort. At a very high temperature every kept token is about equally
  // likely, so the draws show the kept set: all inside the reference nucleus, nearly all of it.
  ts::Rng r(5);
  std::vector<float> logits(3000);
  for (float& l : logits) l = static_cast<float>(r.uniform() * 10 - 5);
  std::vector<std::pair<float, int32_t>> sorted;
  for (size_t i = 0; i < logits.size(); ++i)
    sorted.emplace_back(logits[i], static_cast<int32_t>(i));
  std::sort(sorted.begin(), sorted.end(), [](auto a, auto b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  double sum = 0.0;
  for (const auto& [l, i] : sorted) sum += std::exp(static_cast<double>(l - sorted[0].first));
  std::vector<bool> in_nucleus(logits.size(), false);
  double cum = 0.0;
  size_t nucleus = 0;
  while (cum < 0.9 * sum) {
    cum += std::exp(static_cast<double>(sorted[nucleus].first - sorted[0].first));
    in_nucleus[sorted[nucleus++].second] = true;
  }
  auto p = plain(1000.0f);
  p.top_p = 0.9f;
  p.seed = 17;
  ts::Sampler s(p);
  std::vector<bool> seen(logits.size(), false);
  size_t distinct = 0;
  for (int i = 0; i < 8000; ++i) {
    const int32_t t = s.sample(logits);
    ASSERT_TRUE(in_nucleus[t]) << "token " << t << " is outside the top-p nucleus";
    if (!seen[t]) {
      seen[t] = true;
      ++distinct;
    }
  }
  EXPECT_GT(nucleus, 300u);
  EXPECT_GT(distinct, nucleus * 95 / 100);
}

TEST(Sampler, RejectsBadParametersAndRows) {
  const auto bad = [](auto edit) {
    auto p = plain(1.0f);
    edit(p);
    EXPECT_THROW(ts::Sampler{p}, ts::Error);
  };
  bad([](ts::SamplerParams& p) { p.top_p = 0.0f; });
  bad([](ts::SamplerParams& p) { p.top_p = 1.5f; });
  bad([](ts::SamplerParams& p) { p.min_p = -0.1f; });
  bad([](ts::SamplerParams& p) { p.repeat_penalty = 0.0f; });
  bad([](ts::SamplerParams& p) { p.temperature = NAN; });
  bad([](ts::SamplerParams& p) { p.penalty_last_n = -2; });
  bad([](ts::SamplerParams& p) { p.logit_bias = {{-1, 1.0f}}; });
  bad([](ts::SamplerParams& p) { p.logit_bias = {{3, 100.5f}}; });
  bad([](ts::SamplerParams& p) { p.logit_bias = {{3, NAN}}; });
  auto biased = plain(0.0f);
  biased.logit_bias = {{2, 1.0f}};
  EXPECT_THROW(ts::Sampler(biased).sample(std::vector<float>{0.0f, 1.0f}), ts::Error);  // id 2 of 2
  biased.logit_bias = {{0, -100.0f}, {1, -100.0f}};
  EXPECT_THROW(ts::Sampler(biased).sample(std::vector<float>{0.0f, 1.0f}),
               ts::Error);  // all banned
  ts::Sampler s(plain(1.0f));
  EXPECT_THROW(s.sample(std::vector<float>{}), ts::Error);
  EXPECT_THROW(s.sample(std::vector<float>{0.0f, NAN}), ts::Error);
  EXPECT_THROW(s.sample(std::vector<float>{-INFINITY, -INFINITY}), ts::Error);
}

TEST(StopStrings, HoldsPossibleStartsAndCutsAtTheStop) {
  ts::StopStrings s({"world", "###"});
  EXPECT_EQ(s.push("Hello wor"), "Hello ");
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.push("ld! more"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.push("ignored"), "");
  EXPECT_EQ(s.flush(), "");
}

TEST(StopStrings, ReleasesTextThatTurnsOutOrdinary) {
  ts::StopStrings s({"world"});
  EXPECT_EQ(s.push("a wo"), "a ");
  EXPECT_EQ(s.push("nder"), "wonder");
  EXPECT_EQ(s.push("w"), "");
  EXPECT_EQ(s.flush(), "w");
}

TEST(StopStrings, EarliestStopWinsAcrossPushes) {
  ts::StopStrings s({"<end>", "nd"});
  EXPECT_EQ(s.push("a <e"), "a ");  // "<e" could start "<end>"
  EXPECT_EQ(s.push("nd> b"), "");   // "<end>" starts before the "nd" inside it
  EXPECT_TRUE(s.stopped());
  ts::StopStrings t({"<end>", "nd"});
  EXPECT_EQ(t.push("x and <end>"), "x a");
  EXPECT_TRUE(t.stopped());
  EXPECT_THROW(ts::StopStrings({""}), ts::Error);
}

}  // namespace
