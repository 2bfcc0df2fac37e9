// Penalty math on hand-made logits. sample() leaves the penalized logits in
// its argument, so each test reads them back after a greedy sample.
#include <gtest/gtest.h>

#include <vector>

#include "sampling_test_util.h"
#include "tern/sampling/sampler.h"

namespace tern {
namespace {

SamplingParams greedy_params() {
  SamplingParams p = test::plain_params();
  p.temperature = 0.0f;
  return p;
}

std::vector<float> penalized(Sampler& s, std::vector<float> logits) {
  s.sample(logits);
  return logits;
}

TEST(Penalties, RepeatDividesPositiveAndMultipliesNegativeOncePerToken) {
  SamplingParams p = greedy_params();
  p.repeat_penalty = 2.0f;
  Sampler s(p, 4);
  s.accept(0, false);
  s.accept(1, false);
  s.accept(0, false);  // repeated: still penalized once
  EXPECT_EQ(penalized(s, {2.0f, -2.0f, 1.0f, 0.5f}), (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f}));
}

TEST(Penalties, RepeatLooksOnlyAtTheLastNTokens) {
  SamplingParams p = greedy_params();
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  Sampler s(p, 4);
  s.accept(0, false);
  s.accept(1, false);
  s.accept(2, true);  // window is now {1, 2}
  EXPECT_EQ(penalized(s, {2, 2, 2, 2}), (std::vector<float>{2, 1, 1, 2}));
  s.accept(3, true);  // {2, 3}
  EXPECT_EQ(penalized(s, {2, 2, 2, 2}), (std::vector<float>{2, 2, 1, 1}));
  s.accept(3, true);  // {3, 3}
  EXPECT_EQ(penalized(s, {2, 2, 2, 2}), (std::vector<float>{2, 2, 2, 1}));
}

TEST(Penalties, RepeatLastNZeroIsOffAndMinusOneIsTheWholeHistory) {
  SamplingParams p = greedy_params();
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 0;
  Sampler off(p, 4);
  off.accept(1, true);
  EXPECT_EQ(penalized(off, {2, 2, 2, 2}), (std::vector<float>{2, 2, 2, 2}));

  p.repeat_last_n = -1;
  Sampler all(p, 4);
  all.accept(1, false);
  for (int i = 0; i < 10000; ++i) all.accept(2, true);
  EXPECT_EQ(penalized(all, {2, 2, 2, 2}), (std::vector<float>{2, 1, 1, 2}));
}

TEST(Penalties, FrequencyAndPresenceCountGeneratedTokensOnly) {
  SamplingParams p = greedy_params();
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p, 4);
  for (int i = 0; i < 3; ++i) s.accept(0, false);  // prompt: ignored here
  s.accept(1, true);
  s.accept(1, true);
  s.accept(2, true);
  // 1: 1 - 2*0.5 - 0.25; 2: 1 - 1*0.5 - 0.25
  EXPECT_EQ(penalized(s, {1, 1, 1, 1}), (std::vector<float>{1, -0.25f, 0.25f, 1}));
}

TEST(Penalties, NegativePenaltiesBoost) {
  SamplingParams p = greedy_params();
  p.frequency_penalty = -1.0f;
  p.presence_penalty = -0.5f;
  Sampler s(p, 3);
  s.accept(2, true);
  EXPECT_EQ(penalized(s, {0, 0, 0}), (std::vector<float>{0, 0, 1.5f}));
}

TEST(Penalties, AllApplyTogetherRepeatFirst) {
  SamplingParams p = greedy_params();
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p, 4);
  s.accept(0, false);
  s.accept(1, false);
  s.accept(2, true);
  s.accept(2, true);
  // 2: 1 / 2 = 0.5, then - 2*0.5 - 0.25 = -0.75
  EXPECT_EQ(penalized(s, {2.0f, -2.0f, 1.0f, 0.5f}),
            (std::vector<float>{1.0f, -4.0f, -0.75f, 0.5f}));
}

TEST(Penalties, ChangeTheGreedyChoice) {
  SamplingParams p = greedy_params();
  p.presence_penalty = 0.5f;
  Sampler s(p, 2);
  std::vector<float> l = {1.0f, 0.9f};
  EXPECT_EQ(s.sample(l), 0);
  s.accept(0, true);
  l = {1.0f, 0.9f};
  EXPECT_EQ(s.sample(l), 1);
}

TEST(Penalties, ResetForgetsTheHistory) {
  SamplingParams p = greedy_params();
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 3;
  p.frequency_penalty = 1.0f;
  Sampler s(p, 4);
  for (int t : {0, 1, 2, 3, 1}) s.accept(t, true);  // ring has wrapped
  s.reset();
  EXPECT_EQ(penalized(s, {2, 2, 2, 2}), (std::vector<float>{2, 2, 2, 2}));
  s.accept(3, true);
  EXPECT_EQ(penalized(s, {2, 2, 2, 2}), (std::vector<float>{2, 2, 2, 0}));
}

}  // namespace
}  // namespace tern
