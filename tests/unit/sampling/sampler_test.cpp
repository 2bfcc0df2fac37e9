#include "tern/sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sampling_test_util.h"
#include "tern/core/error.h"

namespace tern {
namespace {

using test::chi_square;
using test::histogram;
using test::kChiSquareLimit;
using test::kDraws;
using test::logits_from_probs;
using test::plain_params;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_logits(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> l(n);
  for (float& x : l) x = float(gen() % 100000) / 1000.0f - 50.0f;
  return l;
}

int32_t reference_argmax(const std::vector<float>& l) {
  return int32_t(std::max_element(l.begin(), l.end()) - l.begin());  // first of ties
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p = plain_params();
  p.temperature = 0.0f;
  Sampler s(p, 5);
  std::vector<float> l = {1.0f, 3.0f, -2.0f, 3.0f, 2.0f};
  EXPECT_EQ(s.sample(l), 1);
  for (uint32_t k = 0; k < 20; ++k) {
    std::vector<float> r = random_logits(5, k);
    const int32_t want = reference_argmax(r);
    EXPECT_EQ(s.sample(r), want);
  }
}

TEST(Sampler, TopKOneEqualsGreedy) {
  SamplingParams p = plain_params(7);
  p.top_k = 1;
  p.top_p = 0.5f;
  Sampler s(p, 1000);
  for (uint32_t k = 0; k < 50; ++k) {
    std::vector<float> l = random_logits(1000, k);
    const int32_t want = reference_argmax(l);
    EXPECT_EQ(s.sample(l), want) << k;
  }
}

TEST(Sampler, TinyTemperatureActsLikeGreedy) {
  for (float t : {1e-3f, 1e-30f}) {  // 1e-30: 1/t overflows to inf
    SamplingParams p = plain_params(3);
    p.temperature = t;
    Sampler s(p, 64);
    for (uint32_t k = 0; k < 100; ++k) {
      std::vector<float> l(64);
      for (size_t i = 0; i < l.size(); ++i) l[i] = float((i * 37 + k * 11) % 64) * 0.1f;
      const int32_t want = reference_argmax(l);
      EXPECT_EQ(s.sample(l), want) << "t=" << t << " k=" << k;
    }
  }
}

TEST(Sampler, NoFiltersFollowsSoftmax) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  Sampler s(plain_params(11), 4);
  EXPECT_LT(chi_square(histogram(s, logits_from_probs(probs), kDraws), probs), kChiSquareLimit);
}

TEST(Sampler, WrongDistributionFailsTheCheck) {
  // The check itself must be able to fail: a 3-point shift is detected.
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  const std::vector<double> shifted = {0.1, 0.2, 0.33, 0.37};
  Sampler s(plain_params(11), 4);
  EXPECT_GT(chi_square(histogram(s, logits_from_probs(probs), kDraws), shifted), kChiSquareLimit);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  for (float t : {0.5f, 2.0f}) {
    SamplingParams p = plain_params(5);
    p.temperature = t;
    Sampler s(p, 4);
    std::vector<double> want(4);
    double z = 0;
    for (size_t i = 0; i < 4; ++i) z += want[i] = std::pow(probs[i], 1.0 / t);
    for (double& w : want) w /= z;
    EXPECT_LT(chi_square(histogram(s, logits_from_probs(probs), kDraws), want), kChiSquareLimit)
        << "t=" << t;
  }
}

TEST(Sampler, TopKKeepsTheKHighest) {
  SamplingParams p = plain_params(13);
  p.top_k = 2;
  Sampler s(p, 4);
  const std::vector<double> probs = {0.1, 0.4, 0.2, 0.3};
  const std::vector<double> want = {0, 0.4 / 0.7, 0, 0.3 / 0.7};
  EXPECT_LT(chi_square(histogram(s, logits_from_probs(probs), kDraws), want), kChiSquareLimit);
}

TEST(Sampler, TopKOnLargeVocabDrawsOnlyFromTheTopK) {
  SamplingParams p = plain_params(17);
  p.top_k = 40;
  p.temperature = 5.0f;  // flat enough that all 40 get drawn
  const size_t n = 49152;
  Sampler s(p, int32_t(n));
  const std::vector<float> l = random_logits(n, 99);
  std::vector<float> sorted = l;
  std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<float>());
  const float kth = sorted[39];
  const std::vector<int> counts = histogram(s, l, 4000);
  int distinct = 0;
  for (size_t i = 0; i < n; ++i) {
    if (counts[i] == 0) continue;
    ++distinct;
    EXPECT_GE(l[i], kth) << "token " << i << " is outside the top 40";
  }
  EXPECT_GT(distinct, 20);
}

TEST(Sampler, TopPKeepsTheMinimalNucleus) {
  // ids deliberately not in probability order
  const std::vector<double> probs = {0.05, 0.3, 0.15, 0.5};
  struct Case {
    float top_p;
    std::vector<double> want;
  };
  const Case cases[] = {
      {0.45f, {0, 0, 0, 1}},
      {0.75f, {0, 0.3 / 0.8, 0, 0.5 / 0.8}},
      {0.85f, {0, 0.3 / 0.95, 0.15 / 0.95, 0.5 / 0.95}},
      {0.99f, probs},
  };
  for (const Case& c : cases) {
    SamplingParams p = plain_params(19);
    p.top_p = c.top_p;
    Sampler s(p, 4);
    EXPECT_LT(chi_square(histogram(s, logits_from_probs(probs), kDraws), c.want), kChiSquareLimit)
        << "top_p=" << c.top_p;
  }
}

TEST(Sampler, TopPOnAFlatLargeVocabSortsFarEnough) {
  // 1000 equal logits: the nucleus for 0.5 is exactly ids 0..499 (ties by id),
  // more than the first sorted chunk, so the sort has to extend several times.
  SamplingParams p = plain_params(23);
  p.top_p = 0.5f;
  Sampler s(p, 1000);
  const std::vector<int> counts = histogram(s, std::vector<float>(1000, 0.0f), kDraws);
  int low = 0, high = 0;
  for (size_t i = 0; i < 1000; ++i) {
    if (i >= 500) {
      EXPECT_EQ(counts[i], 0) << i;
    } else {
      (i < 250 ? low : high) += counts[i];
    }
  }
  EXPECT_NEAR(double(low) / kDraws, 0.5, 0.02);
  EXPECT_NEAR(double(high) / kDraws, 0.5, 0.02);
  EXPECT_GT(*std::max_element(counts.begin() + 450, counts.begin() + 500), 0);
}

// The nucleus by brute force: sort everything, keep the shortest prefix whose
// probability reaches top_p.
std::vector<bool> reference_nucleus(const std::vector<float>& logits, double temperature,
                                    double top_p) {
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const float la = logits[size_t(a)], lb = logits[size_t(b)];
    return la > lb || (la == lb && a < b);
  });
  const double m = logits[size_t(ids[0])];
  double z = 0;
  for (float l : logits) z += std::exp((l - m) / temperature);
  std::vector<bool> in(logits.size(), false);
  double cum = 0;
  for (int32_t id : ids) {
    in[size_t(id)] = true;
    cum += std::exp((logits[size_t(id)] - m) / temperature) / z;
    if (cum >= top_p) break;
  }
  return in;
}

TEST(Sampler, TopPOnALargeVocabMatchesABruteForceNucleus) {
  // Above the size where top-p buckets candidates before sorting them.
  const size_t n = 2000;
  std::mt19937 gen(4);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(gen);
  for (auto [temperature, top_p] :
       {std::pair{1.0f, 0.5f}, std::pair{0.7f, 0.9f}, std::pair{1.5f, 0.3f}}) {
    SamplingParams p = plain_params(41);
    p.temperature = temperature;
    p.top_p = top_p;
    Sampler s(p, int32_t(n));
    const std::vector<bool> want = reference_nucleus(logits, temperature, top_p);
    const std::vector<int> counts = histogram(s, logits, kDraws);
    size_t members = 0;
    for (size_t i = 0; i < n; ++i) {
      members += want[i];
      EXPECT_EQ(counts[i] > 0, bool(want[i]))
          << "token " << i << " T=" << temperature << " top_p=" << top_p;
    }
    EXPECT_GT(members, 3u);  // a real nucleus, not just the top token
  }
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  struct Case {
    float min_p;
    std::vector<double> want;
  };
  const Case cases[] = {
      {0.2f, {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},  // threshold 0.1
      {0.5f, {0.5 / 0.8, 0.3 / 0.8, 0, 0}},              // threshold 0.25
      {1.0f, {1, 0, 0, 0}},
  };
  for (const Case& c : cases) {
    SamplingParams p = plain_params(29);
    p.min_p = c.min_p;
    Sampler s(p, 4);
    EXPECT_LT(chi_square(histogram(s, logits_from_probs(probs), kDraws), c.want), kChiSquareLimit)
        << "min_p=" << c.min_p;
  }
}

TEST(Sampler, TopPAndMinPTogetherKeepTheSmallerSet) {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  const std::vector<double> want = {0.5 / 0.8, 0.3 / 0.8, 0, 0};
  for (auto [top_p, min_p] : {std::pair{0.75f, 0.2f}, std::pair{0.9f, 0.5f}}) {
    SamplingParams p = plain_params(31);
    p.top_p = top_p;
    p.min_p = min_p;
    p.top_k = 3;
    Sampler s(p, 4);
    EXPECT_LT(chi_square(histogram(s, logits_from_probs(probs), kDraws), want), kChiSquareLimit)
        << top_p << " " << min_p;
  }
}

std::vector<int32_t> draw_sequence(Sampler& s, int steps) {
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) {
    std::vector<float> l(100);
    for (size_t j = 0; j < l.size(); ++j) l[j] = std::sin(float(j * 7 + i)) * 0.5f;
    out.push_back(s.sample(l));
    s.accept(out.back(), true);
  }
  return out;
}

SamplingParams default_with_seed(uint64_t seed) {
  SamplingParams p;  // the default chain: top-k, top-p and min-p all on
  p.seed = seed;
  p.repeat_penalty = 1.1f;
  p.presence_penalty = 0.3f;
  return p;
}

TEST(Sampler, SameSeedSameSequence) {
  Sampler a(default_with_seed(1234), 100);
  Sampler b(default_with_seed(1234), 100);
  Sampler c(default_with_seed(1235), 100);
  const std::vector<int32_t> sa = draw_sequence(a, 300);
  EXPECT_EQ(sa, draw_sequence(b, 300));
  EXPECT_NE(sa, draw_sequence(c, 300));
  EXPECT_EQ(a.seed(), 1234u);
  a.reset();  // clears the penalties' history and rewinds the generator
  EXPECT_EQ(sa, draw_sequence(a, 300));
}

TEST(Sampler, RandomSeedIsReportedAndReplays) {
  Sampler a(default_with_seed(kRandomSeed), 100);
  Sampler b(default_with_seed(kRandomSeed), 100);
  EXPECT_NE(a.seed(), kRandomSeed);
  EXPECT_NE(a.seed(), b.seed());
  Sampler replay(default_with_seed(a.seed()), 100);
  EXPECT_EQ(draw_sequence(a, 200), draw_sequence(replay, 200));
}

TEST(Sampler, NaNAndInfinityNeverCrash) {
  for (float temperature : {0.0f, 1.0f}) {
    SamplingParams p = plain_params(37);
    p.temperature = temperature;
    p.top_p = 0.9f;
    p.min_p = 0.1f;
    Sampler s(p, 4);
    std::vector<float> all_nan(4, kNaN);
    EXPECT_EQ(s.sample(all_nan), 0);
    std::vector<float> all_neg_inf(4, -kInf);
    EXPECT_EQ(s.sample(all_neg_inf), 0);
    for (int i = 0; i < 50; ++i) {
      std::vector<float> one_finite = {kNaN, -kInf, 1.0f, kNaN};
      EXPECT_EQ(s.sample(one_finite), 2);
      std::vector<float> nan_first = {kNaN, -30.0f, -1.0f, kNaN};
      EXPECT_EQ(s.sample(nan_first), 2);
    }
    std::vector<int> counts(4, 0);
    for (int i = 0; i < 400; ++i) {
      std::vector<float> pos_inf = {0.0f, kInf, 3.0f, kInf};
      ++counts[size_t(s.sample(pos_inf))];
    }
    EXPECT_EQ(counts[0] + counts[2], 0);
    EXPECT_GT(counts[1], 0);
    if (temperature > 0) {
      EXPECT_GT(counts[3], 0);  // the two +inf share the mass
    } else {
      EXPECT_EQ(counts[1], 400);  // greedy: lowest id of the tie
    }
  }
}

TEST(Sampler, RejectsBadInputs) {
  EXPECT_THROW(Sampler(plain_params(), 0), InvalidArgument);
  SamplingParams bad = plain_params();
  bad.top_p = 2.0f;
  EXPECT_THROW(Sampler(bad, 10), InvalidArgument);
  Sampler s(plain_params(), 10);
  std::vector<float> wrong(9, 0.0f);
  EXPECT_THROW(s.sample(wrong), InvalidArgument);
  EXPECT_THROW(s.accept(10, true), InvalidArgument);
  EXPECT_THROW(s.accept(-1, false), InvalidArgument);
}

}  // namespace
}  // namespace tern
