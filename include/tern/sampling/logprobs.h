#pragma once
// Log probabilities of a sampled token and its most likely alternatives, as
// OpenAI's `logprobs` / `top_logprobs` report them.
//
// They are computed from the model's raw logits: a log-softmax over the whole
// vocabulary in fp32 (the max and the log-sum-exp; the sum itself accumulates
// in double), BEFORE any sampling transform (grammar mask, logit_bias,
// penalties, temperature, top-k/p, min-p). This is what OpenAI reports and
// vLLM's default ("raw_logprobs"): the model's own distribution, so a token the
// sampler could never pick (banned, masked) still shows its true probability.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace tern {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;  // log p(token), <= 0
  // The top alternatives, most likely first (ties: lower id first), k entries
  // (fewer when the vocabulary has fewer finite logits).
  std::vector<std::pair<int32_t, float>> top;
};

// Log-softmax statistics of one row of logits, computed once per step and
// then read for any token. NaN counts as -inf.
class LogSoftmax {
 public:
  // logits: (n_vocab). Keeps no reference to them.
  void compute(std::span<const float> logits);
  // log p(token) for a raw logit of that row.
  float logprob(float logit) const;
  float max() const { return max_; }
  float log_sum_exp() const { return lse_; }

 private:
  float max_ = 0.0f;
  float lse_ = 0.0f;  // log(sum(exp(l))): logprob = l - lse
};

// The k most likely tokens of `logits` (k >= 0) as (id, log p) pairs, most
// likely first, ties to the lower id. `ls` holds logits' statistics. Resizes
// `out` to min(k, finite logits); `heap` is scratch (reused, so a sampler that
// calls this every step allocates only the first time).
void top_logprobs(std::span<const float> logits, const LogSoftmax& ls, int k,
                  std::vector<std::pair<int32_t, float>>& out, std::vector<int32_t>& heap);

}  // namespace tern
