#include "tern/sampling/sampler.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "tern/core/error.h"

namespace tern {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr size_t kHistoryReserve = 4096;      // initial capacity when repeat_last_n == -1
constexpr size_t kNucleusPrefilterMin = 256;  // top-p buckets candidates before sorting above this
constexpr size_t kHeapTopKDivisor = 16;       // top-k by heap when k <= n_vocab / this

uint64_t draw_random_seed() {
  uint64_t s = 0;
  try {
    std::random_device rd;
    s = (uint64_t(rd()) << 32) ^ uint64_t(rd());
  } catch (const std::exception&) {
    // No entropy source: the clock alone still differs from run to run.
  }
  s ^=
      uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  return s == kRandomSeed ? 0 : s;
}

// Candidate order: higher logit first, then lower id. A total order, so every
// sort and selection gives the same result on every standard library.
struct ByLogit {
  std::span<const float> logits;
  bool operator()(int32_t a, int32_t b) const {
    const float la = logits[size_t(a)], lb = logits[size_t(b)];
    return la > lb || (la == lb && a < b);
  }
};

// Uniform in [0, 1) from the top 53 bits of one draw: the same on every
// standard library, unlike std::uniform_real_distribution.
double uniform01(std::mt19937_64& rng) {
  return double(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

Sampler::Sampler(const SamplingParams& p, int32_t n_vocab) : params_(p), n_vocab_(n_vocab) {
  params_.validate();
  if (n_vocab <= 0) {
    throw InvalidArgument("sampling: n_vocab must be > 0, got " + std::to_string(n_vocab));
  }
  seed_ = params_.seed == kRandomSeed ? draw_random_seed() : params_.seed;
  rng_.seed(seed_);
  const size_t n = size_t(n_vocab);
  if (params_.repeat_last_n > 0) {
    window_.resize(size_t(params_.repeat_last_n));
  } else if (params_.repeat_last_n == -1) {
    window_.reserve(kHistoryReserve);
  }
  window_count_.assign(n, 0);
  gen_count_.assign(n, 0);
  gen_tokens_.reserve(n);
  cand_.resize(n);
  prob_.resize(n);
  for (const auto& [id, bias] : params_.logit_bias) {
    if (id >= n_vocab) {
      throw InvalidArgument("sampling: logit_bias token " + std::to_string(id) +
                            " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
  }
  if (params_.logprobs >= 0) {
    raw_.resize(n);
    heap_.reserve(size_t(params_.logprobs));
    last_.top.reserve(size_t(params_.logprobs));
  }
}

void Sampler::accept(int32_t token, bool generated) {
  if (token < 0 || token >= n_vocab_) {
    throw InvalidArgument("sampling: token " + std::to_string(token) +
                          " is outside the vocabulary [0, " + std::to_string(n_vocab_) + ")");
  }
  if (params_.repeat_last_n == -1) {
    window_.push_back(token);
    window_len_ = window_.size();
    ++window_count_[size_t(token)];
  } else if (params_.repeat_last_n > 0) {
    if (window_len_ < window_.size()) {
      window_[window_len_++] = token;
    } else {  // full ring: the oldest token leaves the window
      --window_count_[size_t(window_[window_head_])];
      window_[window_head_] = token;
      window_head_ = (window_head_ + 1) % window_.size();
    }
    ++window_count_[size_t(token)];
  }
  if (generated) {
    if (gen_count_[size_t(token)]++ == 0) gen_tokens_.push_back(token);
    if (constraint_) constraint_->accept(token);
  }
}

void Sampler::reset() {
  for (size_t i = 0; i < window_len_; ++i) window_count_[size_t(window_[i])] = 0;
  if (params_.repeat_last_n == -1) window_.clear();
  window_len_ = 0;
  window_head_ = 0;
  for (int32_t t : gen_tokens_) gen_count_[size_t(t)] = 0;
  gen_tokens_.clear();
  if (constraint_) constraint_->reset();
  has_logprobs_ = false;
  rng_.seed(seed_);
}

void Sampler::apply_logit_bias(std::span<float> logits) const {
  for (const auto& [id, bias] : params_.logit_bias) {
    float& l = logits[size_t(id)];
    l = bias <= -kMaxLogitBiasValue ? kNegInf : l + bias;
  }
}

void Sampler::apply_penalties(std::span<float> logits) {
  const float rp = params_.repeat_penalty;
  if (rp != 1.0f) {
    // Once per distinct token: a count is negated while its token is done.
    for (size_t i = 0; i < window_len_; ++i) {
      const size_t t = size_t(window_[i]);
      if (window_count_[t] <= 0) continue;
      float& l = logits[t];
      l = l > 0.0f ? l / rp : l * rp;
      window_count_[t] = -window_count_[t];
    }
    for (size_t i = 0; i < window_len_; ++i) {
      const size_t t = size_t(window_[i]);
      if (window_count_[t] < 0) window_count_[t] = -window_count_[t];
    }
  }
  const float freq = params_.frequency_penalty;
  const float pres = params_.presence_penalty;
  if (freq != 0.0f || pres != 0.0f) {
    for (int32_t t : gen_tokens_) {
      logits[size_t(t)] -= float(gen_count_[size_t(t)]) * freq + pres;
    }
  }
}

int32_t Sampler::argmax(std::span<const float> logits) const {
  // Strict > : ties keep the lowest id, NaN never wins, all -inf/NaN gives 0.
  size_t best = 0;
  float best_logit = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_logit) {
      best_logit = logits[i];
      best = i;
    }
  }
  return int32_t(best);
}

size_t Sampler::select_top_k(std::span<const float> logits, bool* sorted) {
  const ByLogit by_logit{logits};
  const size_t n_vocab = logits.size();
  const size_t k = params_.top_k > 0 ? size_t(params_.top_k) : n_vocab;
  *sorted = false;
  if (k < n_vocab && k <= n_vocab / kHeapTopKDivisor) {
    // One pass with a heap of the best k, its worst on top: most logits are
    // rejected by a single compare with `worst`. Ids rise, so a tie with the
    // worst never displaces it (ties go to the lowest id).
    const auto heap = cand_.begin();
    size_t m = 0;
    float worst = kNegInf;
    for (size_t i = 0; i < n_vocab; ++i) {
      const float l = logits[i];
      if (!(l > kNegInf)) continue;  // -inf and NaN are never candidates
      if (m < k) {
        cand_[m++] = int32_t(i);
        std::push_heap(heap, heap + ptrdiff_t(m), by_logit);
        if (m == k) worst = logits[size_t(cand_[0])];
      } else if (l > worst) {
        std::pop_heap(heap, heap + ptrdiff_t(k), by_logit);
        cand_[k - 1] = int32_t(i);
        std::push_heap(heap, heap + ptrdiff_t(k), by_logit);
        worst = logits[size_t(cand_[0])];
      }
    }
    std::sort_heap(heap, heap + ptrdiff_t(m), by_logit);  // best first
    *sorted = true;
    return m;
  }
  size_t n = 0;
  for (size_t i = 0; i < n_vocab; ++i) {
    if (logits[i] > kNegInf) cand_[n++] = int32_t(i);
  }
  if (k < n) {
    // Large k: partial selection, then sort the survivors so that the draw
    // walks them in an order that does not depend on the standard library.
    std::nth_element(cand_.begin(), cand_.begin() + ptrdiff_t(k), cand_.begin() + ptrdiff_t(n),
                     by_logit);
    std::sort(cand_.begin(), cand_.begin() + ptrdiff_t(k), by_logit);
    n = k;
    *sorted = true;
  }
  return n;
}

size_t Sampler::filter_min_p(size_t n, float max_prob) {
  const float threshold = params_.min_p * max_prob;
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (prob_[size_t(cand_[i])] >= threshold) cand_[kept++] = cand_[i];
  }
  return kept;
}

size_t Sampler::nucleus_candidates(std::span<const float> logits, size_t n, float max_logit,
                                   float inv_t, double target) {
  // Bucket b holds logits with (max - l) / T in [b, b + 1) / kBucketsPerNat;
  // the last one holds everything lower. Bucket order is probability order.
  auto bucket = [&](float l) -> size_t {
    if (l == max_logit) return 0;  // also when inv_t is inf
    const float x = (max_logit - l) * inv_t * kBucketsPerNat;
    return x < float(kBuckets - 1) ? size_t(x) : kBuckets - 1;
  };
  std::array<double, kBuckets> mass{};
  for (size_t i = 0; i < n; ++i) {
    const size_t t = size_t(cand_[i]);
    mass[bucket(logits[t])] += double(prob_[t]);
  }
  // Every bucket before the one where the mass reaches the target is wholly
  // in the nucleus, and nothing after it is.
  size_t last = kBuckets - 1;
  double cum = 0.0;
  for (size_t b = 0; b < kBuckets; ++b) {
    cum += mass[b];
    if (cum >= target) {
      last = b;
      break;
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (bucket(logits[size_t(cand_[i])]) <= last) cand_[kept++] = cand_[i];
  }
  return kept;
}

size_t Sampler::filter_top_p(std::span<const float> logits, size_t n, bool sorted, float max_logit,
                             float inv_t, double total) {
  const double target = double(params_.top_p) * total;
  if (!sorted) {
    // Sort only the candidates that can be in the nucleus.
    if (n > kNucleusPrefilterMin && max_logit != kPosInf) {
      n = nucleus_candidates(logits, n, max_logit, inv_t, target);
    }
    std::sort(cand_.begin(), cand_.begin() + ptrdiff_t(n), ByLogit{logits});
  }
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += double(prob_[size_t(cand_[i])]);
    if (cum >= target) return i + 1;
  }
  return n;
}

int32_t Sampler::draw(size_t n, double total) {
  const double r = uniform01(rng_) * total;
  double acc = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < n; ++i) {
    const double p = double(prob_[size_t(cand_[i])]);
    if (p <= 0.0) continue;
    acc += p;
    last_positive = i;
    if (r < acc) return cand_[i];
  }
  return cand_[last_positive];  // r rounded up to total
}

double Sampler::softmax(std::span<const float> logits, size_t n, float* max_logit) {
  float m = kNegInf;
  for (size_t i = 0; i < n; ++i) m = std::max(m, logits[size_t(cand_[i])]);
  *max_logit = m;
  const float inv_t = 1.0f / params_.temperature;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const size_t t = size_t(cand_[i]);
    // l == m is tested first: with a tiny temperature inv_t may be inf.
    const float l = logits[t];
    const float p = l == m ? 1.0f : m == kPosInf ? 0.0f : std::exp((l - m) * inv_t);
    prob_[t] = p;
    total += double(p);
  }
  return total;
}

int32_t Sampler::sample(std::span<float> logits) {
  if (logits.size() != size_t(n_vocab_)) {
    throw InvalidArgument("sampling: got " + std::to_string(logits.size()) +
                          " logits for a vocabulary of " + std::to_string(n_vocab_));
  }
  if (params_.logprobs < 0) return pick(logits);
  // Log probabilities come from the logits as the model gave them.
  std::copy(logits.begin(), logits.end(), raw_.begin());
  log_softmax_.compute(raw_);
  const int32_t token = pick(logits);
  last_.token = token;
  last_.logprob = log_softmax_.logprob(raw_[size_t(token)]);
  top_logprobs(raw_, log_softmax_, params_.logprobs, last_.top, heap_);
  has_logprobs_ = true;
  return token;
}

int32_t Sampler::pick(std::span<float> logits) {
  if (constraint_) constraint_->mask(logits);
  if (!params_.logit_bias.empty()) apply_logit_bias(logits);
  apply_penalties(logits);
  if (params_.temperature <= 0.0f || params_.top_k == 1) return argmax(logits);

  bool sorted = false;
  size_t n = select_top_k(logits, &sorted);
  if (n == 0) return 0;  // every logit is -inf

  // Temperature and softmax, unnormalized: p = exp((l - max) / T), so the
  // largest is exactly 1. If some logits are +inf, they share all the mass.
  float max_logit = kNegInf;
  const double total = softmax(logits, n, &max_logit);
  const size_t n_all = n;

  // top-p then min-p keep a prefix of the candidates sorted by probability
  // each, so together they keep the shorter prefix: min-p runs first (linear,
  // no sort) and top-p measures its mass against the full top-k total.
  if (params_.min_p > 0.0f) n = filter_min_p(n, 1.0f);
  if (params_.top_p < 1.0f) {
    n = filter_top_p(logits, n, sorted, max_logit, 1.0f / params_.temperature, total);
  }
  if (n == n_all) return draw(n, total);  // same order, so the same sum
  double kept = 0.0;
  for (size_t i = 0; i < n; ++i) kept += double(prob_[size_t(cand_[i])]);
  return draw(n, kept);
}

}  // namespace tern
