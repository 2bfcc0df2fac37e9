#pragma once
// Picks the next token of one sequence from its logits.
//
// Chain (llama.cpp's order of filters, but temperature applied before top-p
// and min-p, as Hugging Face does, so it shapes the nucleus):
//   [grammar mask] -> logit_bias -> penalties -> top-k -> temperature -> softmax -> top-p -> min-p
//   -> draw with a seeded std::mt19937_64.
// temperature <= 0 (or top_k == 1) short-cuts to argmax after the penalties.
// NaN logits count as -inf: never chosen. Ties go to the lowest id.
//
// A Sampler owns scratch buffers sized to the vocabulary, built once in the
// constructor: sample() never allocates. Move-only (one per sequence).
//
// With params.logprobs >= 0, sample() also records the sampled token's log
// probability and the top alternatives from the logits as they came in (see
// logprobs.h); last_logprobs() reads them. Off (-1), it costs nothing.
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "tern/sampling/json_constraint.h"
#include "tern/sampling/logprobs.h"
#include "tern/sampling/params.h"

namespace tern {

class Sampler {
 public:
  // Validates `p` (throws InvalidArgument) and needs n_vocab > 0.
  Sampler(const SamplingParams& p, int32_t n_vocab);

  Sampler(Sampler&&) noexcept = default;
  Sampler& operator=(Sampler&&) noexcept = default;
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Constrains every later sample() to the tokens c allows (see
  // JsonConstraint); accept(token, true) advances it. nullptr: unconstrained.
  void constrain(std::unique_ptr<JsonConstraint> c) { constraint_ = std::move(c); }
  const JsonConstraint* constraint() const { return constraint_.get(); }

  // Adds a token to the history the penalties look at: prompt tokens
  // (generated = false) count for repeat_penalty only, generated ones for all.
  // Throws InvalidArgument when token is outside [0, n_vocab). May allocate
  // only when repeat_last_n == -1 (the history then grows with the sequence).
  void accept(int32_t token, bool generated);

  // Returns the next token id. logits: (n_vocab); on return it holds the
  // penalized logits (temperature is not written back). NaN/inf never crash:
  // if every logit is -inf or NaN the answer is 0; if some are +inf, they
  // share all the probability. Throws InvalidArgument if logits.size() != n_vocab.
  int32_t sample(std::span<float> logits);

  // The log probabilities of the token the last sample() returned, or nullptr
  // when params.logprobs is -1 or nothing was sampled yet.
  const TokenLogprob* last_logprobs() const { return has_logprobs_ ? &last_ : nullptr; }

  // The seed in use: params.seed, or the random one drawn for kRandomSeed
  // (never kRandomSeed itself, so it can be sent back to replay the sequence).
  uint64_t seed() const { return seed_; }

  // Clears the history and re-seeds the generator with seed(): after reset()
  // the same inputs give the same tokens as after construction.
  void reset();

  const SamplingParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  int32_t pick(std::span<float> logits);  // the chain above, after the checks
  void apply_logit_bias(std::span<float> logits) const;
  void apply_penalties(std::span<float> logits);
  int32_t argmax(std::span<const float> logits) const;
  // Fills cand_ with the ids left after top-k, returns how many; they come
  // sorted (logit desc, id asc) when top-k cut them.
  size_t select_top_k(std::span<const float> logits, bool* sorted);
  // Unnormalized softmax of cand_[0, n) into prob_ (max 1); returns the sum.
  double softmax(std::span<const float> logits, size_t n, float* max_logit);
  // Keeps the min-p survivors of cand_[0, n) in place (order preserved).
  size_t filter_min_p(size_t n, float max_prob);
  // Sorts cand_[0, n) as far as needed and returns the nucleus size: the
  // shortest prefix whose mass reaches top_p * total.
  size_t filter_top_p(std::span<const float> logits, size_t n, bool sorted, float max_logit,
                      float inv_t, double total);
  // Moves to the front the candidates in the probability buckets that can hold
  // the nucleus (one pass, no sort); returns how many.
  size_t nucleus_candidates(std::span<const float> logits, size_t n, float max_logit, float inv_t,
                            double target);
  // Draws one of cand_[0, n) in proportion to prob_; total: their sum.
  int32_t draw(size_t n, double total);

  static constexpr size_t kBuckets = 256;
  static constexpr float kBucketsPerNat = 8.0f;  // buckets cover 32 nats below the max

  SamplingParams params_;
  int32_t n_vocab_;
  uint64_t seed_;
  std::mt19937_64 rng_;

  // Repeat-penalty window: the last repeat_last_n accepted tokens, a ring
  // (capacity repeat_last_n) or, for -1, the whole history. Valid entries are
  // window_[0, window_len_) in any order.
  std::vector<int32_t> window_;
  size_t window_len_ = 0;
  size_t window_head_ = 0;             // oldest entry once the ring is full
  std::vector<int32_t> window_count_;  // (n_vocab) occurrences in the window

  std::vector<int32_t> gen_count_;   // (n_vocab) occurrences among generated tokens
  std::vector<int32_t> gen_tokens_;  // distinct generated ids (capacity n_vocab)

  std::vector<int32_t> cand_;                   // (n_vocab) candidate ids
  std::vector<float> prob_;                     // (n_vocab) unnormalized probability, by id
  std::unique_ptr<JsonConstraint> constraint_;  // grammar mask, or none

  // Log probabilities (params.logprobs >= 0 only; empty otherwise).
  std::vector<float> raw_;     // (n_vocab) the logits as sample() received them
  std::vector<int32_t> heap_;  // (logprobs) scratch for the top alternatives
  LogSoftmax log_softmax_;
  TokenLogprob last_;
  bool has_logprobs_ = false;
};

}  // namespace tern
