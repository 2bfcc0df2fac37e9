// Log probabilities (logprobs.h) and logit_bias through the Sampler.
#include "tern/sampling/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling_test_util.h"
#include "tern/core/error.h"
#include "tern/sampling/sampler.h"

namespace tern {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(LogSoftmax, MatchesLogOfSoftmax) {
  const std::vector<double> probs = {0.5, 0.25, 0.125, 0.125};
  const auto logits = test::logits_from_probs(probs);
  LogSoftmax ls;
  ls.compute(logits);
  for (size_t i = 0; i < probs.size(); ++i)
    EXPECT_NEAR(ls.logprob(logits[i]), std::log(probs[i]), 1e-6);
  // Shifting every logit changes nothing.
  std::vector<float> shifted = logits;
  for (float& l : shifted) l += 1000.0f;
  LogSoftmax ls2;
  ls2.compute(shifted);
  EXPECT_NEAR(ls2.logprob(shifted[0]), std::log(0.5), 1e-4);
}

TEST(LogSoftmax, NanAndInfinities) {
  const std::vector<float> logits = {std::nanf(""), -kInf, 0.0f, 0.0f};
  LogSoftmax ls;
  ls.compute(logits);
  EXPECT_NEAR(ls.logprob(0.0f), std::log(0.5), 1e-6);
  EXPECT_EQ(ls.logprob(-kInf), -kInf);
  EXPECT_EQ(ls.logprob(std::nanf("")), -kInf);
  LogSoftmax all_bad;
  all_bad.compute(std::vector<float>{-kInf, std::nanf("")});
  EXPECT_EQ(all_bad.logprob(-kInf), -kInf);
}

TEST(TopLogprobs, SortedTiesToLowerIdAndBounded) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -kInf, 0.5f};
  LogSoftmax ls;
  ls.compute(logits);
  std::vector<std::pair<int32_t, float>> out;
  std::vector<int32_t> heap;
  top_logprobs(logits, ls, 3, out, heap);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].first, 1);
  EXPECT_EQ(out[1].first, 3);
  EXPECT_EQ(out[2].first, 2);
  EXPECT_EQ(out[0].second, out[1].second);
  EXPECT_GT(out[1].second, out[2].second);
  top_logprobs(logits, ls, 20, out, heap);  // only 5 finite logits
  EXPECT_EQ(out.size(), 5u);
  top_logprobs(logits, ls, 0, out, heap);
  EXPECT_TRUE(out.empty());
}

TEST(SamplerLogprobs, OffByDefault) {
  Sampler s(test::plain_params(), 4);
  std::vector<float> logits = {0, 1, 2, 3};
  s.sample(logits);
  EXPECT_EQ(s.last_logprobs(), nullptr);
}

TEST(SamplerLogprobs, GreedyTopContainsTheSampledTokenFirst) {
  SamplingParams p = test::plain_params();
  p.temperature = 0.0f;
  p.logprobs = 3;
  Sampler s(p, 5);
  std::vector<float> logits = {0.1f, 2.0f, 1.5f, -1.0f, 0.0f};
  const std::vector<float> raw = logits;
  const int32_t t = s.sample(logits);
  const TokenLogprob* lp = s.last_logprobs();
  ASSERT_NE(lp, nullptr);
  EXPECT_EQ(lp->token, t);
  ASSERT_EQ(lp->top.size(), 3u);
  EXPECT_EQ(lp->top[0].first, t);
  EXPECT_EQ(lp->top[0].second, lp->logprob);
  EXPECT_GE(lp->top[1].second, lp->top[2].second);
  double sum = 0;
  for (float l : raw) sum += std::exp(double(l));
  EXPECT_NEAR(lp->logprob, raw[1] - std::log(sum), 1e-5);
}

// The log probabilities are the model's: temperature, penalties and bias do not change them.
TEST(SamplerLogprobs, ComputedBeforeTheSamplingTransforms) {
  SamplingParams p = test::plain_params();
  p.temperature = 0.3f;
  p.presence_penalty = 2.0f;
  p.logit_bias = {{0, 5.0f}};
  p.logprobs = 0;
  Sampler s(p, 3);
  std::vector<float> logits = {0.0f, 0.0f, 0.0f};
  const int32_t t = s.sample(logits);
  ASSERT_NE(s.last_logprobs(), nullptr);
  EXPECT_NEAR(s.last_logprobs()->logprob, std::log(1.0 / 3.0), 1e-6);
  EXPECT_TRUE(s.last_logprobs()->top.empty());
  EXPECT_EQ(t, 0);  // +5 on token 0 at T=0.3: practically certain
}

TEST(LogitBias, MinusHundredBansAndPositiveFavours) {
  SamplingParams p = test::plain_params(7);
  p.logit_bias = {{2, -100.0f}};
  Sampler s(p, 3);
  const std::vector<float> logits = {0.0f, 0.0f, 10.0f};  // token 2 would win ~all draws
  const auto counts = test::histogram(s, logits, 2000);
  EXPECT_EQ(counts[2], 0);
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[1], 0);
  // Greedy too.
  p.temperature = 0.0f;
  Sampler g(p, 3);
  std::vector<float> l2 = logits;
  EXPECT_NE(g.sample(l2), 2);
  p.logit_bias = {{0, 20.0f}};
  Sampler f(p, 3);
  std::vector<float> l3 = logits;
  EXPECT_EQ(f.sample(l3), 0);
}

TEST(LogitBias, Validation) {
  SamplingParams p = test::plain_params();
  p.logit_bias = {{5, 1.0f}};
  EXPECT_THROW(Sampler(p, 3), InvalidArgument);  // outside the vocabulary
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(p.validate(), InvalidArgument);
  p.logit_bias = {{1, 101.0f}};
  EXPECT_THROW(p.validate(), InvalidArgument);
  p.logit_bias = {{1, std::nanf("")}};
  EXPECT_THROW(p.validate(), InvalidArgument);
  p.logit_bias = {};
  p.logprobs = kMaxTopLogprobs + 1;
  EXPECT_THROW(p.validate(), InvalidArgument);
  p.logprobs = kMaxTopLogprobs;
  EXPECT_NO_THROW(p.validate());
}

// Same seed, same tokens: per-choice seeds make n > 1 reproducible.
TEST(SamplerSeed, SameSeedSameSequenceDifferentSeedDiffers) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 7) * 0.3f;
  auto run = [&](uint64_t seed) {
    Sampler s(test::plain_params(seed), int32_t(logits.size()));
    std::vector<int32_t> out;
    for (int i = 0; i < 32; ++i) {
      std::vector<float> l = logits;
      out.push_back(s.sample(l));
    }
    return out;
  };
  EXPECT_EQ(run(11), run(11));
  EXPECT_NE(run(11), run(12));
}

}  // namespace
}  // namespace tern
