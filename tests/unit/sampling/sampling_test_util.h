#pragma once
// Helpers for the sampling tests: logits from known probabilities, empirical
// histograms over many draws, and a chi-square distance to compare them.
#include <cmath>
#include <cstdint>
#include <vector>

#include "tern/sampling/sampler.h"

namespace tern::test {

// Params with every filter off: plain softmax sampling at temperature 1.
inline SamplingParams plain_params(uint64_t seed = 42) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

// logits = log(probs): softmax gives back probs.
inline std::vector<float> logits_from_probs(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(float(std::log(p)));
  return logits;
}

// Counts of each token over `draws` calls of sample() on a fresh copy of logits.
inline std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  std::vector<float> scratch(logits.size());
  for (int i = 0; i < draws; ++i) {
    scratch = logits;
    ++counts[size_t(s.sample(scratch))];
  }
  return counts;
}

// Pearson chi-square of counts against `expected` probabilities (which sum to
// 1). A token with expected probability 0 that was drawn makes it infinite.
inline double chi_square(const std::vector<int>& counts, const std::vector<double>& expected) {
  double total = 0;
  for (int c : counts) total += c;
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * total;
    if (e == 0) {
      if (counts[i] != 0) return INFINITY;
      continue;
    }
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

// Above the 0.999 quantile of chi-square with up to 4 degrees of freedom
// (18.47), so a correct sampler fails with a fixed seed essentially never,
// while a wrong distribution (shifted by a few percent over 20000 draws) fails.
inline constexpr double kChiSquareLimit = 20.0;
inline constexpr int kDraws = 20000;

}  // namespace tern::test
