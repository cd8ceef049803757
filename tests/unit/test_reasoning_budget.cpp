// The reasoning budget: after N tokens of reasoning the end marker's tokens are forced, one a
// step, then the model is free again; a model that ends its reasoning in time is never forced; a
// marker cut across tokens is still found; no budget, no forcing.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "text/reasoning_budget.h"

namespace ts {
namespace {

const ReasoningMarkers kThink{"<think>", "</think>", {90, 91, 92}};

// Feeds tokens 1, 2, ... with the texts given; returns how many were fed before forcing began.
int feed_until_forced(ReasoningBudget& b, const std::vector<std::string>& texts) {
  int fed = 0;
  for (const std::string& t : texts) {
    if (b.forced() >= 0) break;
    b.advance(fed + 1, t);
    ++fed;
  }
  return fed;
}

TEST(ReasoningBudget, ForcesTheEndAfterNTokens) {
  ReasoningBudget b(&kThink, 3, false);
  EXPECT_EQ(feed_until_forced(b, {"<th", "ink>", "a", "b", "c", "d", "e"}), 5);
  // The marker's tokens, in order, each the only one left in the logits.
  for (int32_t want : kThink.close_tokens) {
    ASSERT_EQ(b.forced(), want);
    std::vector<float> logits(100, 0.5f);
    b.mask(logits);
    for (size_t i = 0; i < logits.size(); ++i)
      EXPECT_EQ(std::isinf(logits[i]), static_cast<int32_t>(i) != want) << i;
    b.advance(want, "");
  }
  EXPECT_EQ(b.forced(), -1);
  b.advance(7, "<think>");  // reasoning does not start again
  EXPECT_EQ(feed_until_forced(b, {"x", "y", "z", "w"}), 4);
}

TEST(ReasoningBudget, AModelThatEndsInTimeIsNotForced) {
  ReasoningBudget b(&kThink, 4, false);
  EXPECT_EQ(feed_until_forced(b, {"<think>", "a", "b", "</th", "ink>", "c", "d", "e", "f"}), 9);
}

TEST(ReasoningBudget, PromptOpenedAndZeroBudgetForcesAtOnce) {
  ReasoningBudget zero(&kThink, 0, true);
  EXPECT_EQ(zero.forced(), 90);
  ReasoningBudget open(&kThink, 2, true);
  EXPECT_EQ(feed_until_forced(open, {"a", "b", "c"}), 2);
  ReasoningBudget unlimited(&kThink, -1, true);
  EXPECT_EQ(feed_until_forced(unlimited, std::vector<std::string>(50, "a")), 50);
  ReasoningBudget none(nullptr, 1, true);
  EXPECT_EQ(none.forced(), -1);
  // Harmony's analysis channel is reasoning too.
  const ReasoningMarkers harmony{"<|channel|>analysis<|message|>", "<|end|>", {5}};
  ReasoningBudget h(&harmony, 1, false);
  EXPECT_EQ(feed_until_forced(h, {"<|channel|>", "analysis", "<|message|>", "x", "y"}), 4);
  EXPECT_EQ(h.forced(), 5);
}

}  // namespace
}  // namespace ts
