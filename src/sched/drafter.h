#pragma once
// Guesses of a sequence's next tokens for speculative decoding: the model
// then checks k guesses in one pass (a verify entry of k + 1 positions), and
// every guess it agrees with is a token that cost no decode step of its own.
// A guess is only ever a proposal: the sequence's own sampler decides each
// token from the verify rows exactly as it would from decode steps, so the
// output is the same with and without guesses (greedy and seeded sampling
// alike). Private to the scheduler; engine thread only.
#include <cstdint>
#include <span>
#include <vector>

namespace tern::sched {

// Prompt lookup: the last n tokens (n from kMaxNgram down to kMinNgram) are
// looked for earlier in the sequence's own tokens (prompt and output, the
// most recent occurrence first), and what followed them there is proposed.
// Text the model copies (a file being edited, a quoted tool result, JSON
// echoing its input) is found this way with no extra model.
class NgramDrafter {
 public:
  static constexpr int kMaxNgram = 4;
  static constexpr int kMinNgram = 2;
  // Farthest back a match is looked for (tokens), so a long context's
  // lookup stays a small, bounded cost per step.
  static constexpr int kMaxLookback = 16384;

  // Up to k tokens that may follow `tokens` (into `out`, cleared first);
  // none when nothing matches.
  static void propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out);
};

// Predicted Outputs: the client sent the text it expects (OpenAI's
// `prediction`, e.g. a file before an edit). The output is followed through
// it: the last tokens generated are found in the prediction (where the
// previous guess left off first, then anywhere), and what follows them there
// is proposed; before the first token, its start.
class PredictionDrafter {
 public:
  static constexpr int kMaxNgram = 8;
  // A single-token match is only trusted this close after the cursor.
  static constexpr int kNearWindow = 32;

  // Up to k tokens that may follow `output` (the tokens generated so far),
  // from `prediction`; `cursor` (the sequence's, 0 at first) is where the
  // last match ended, updated to this one's. None when the output has left
  // the prediction.
  static void propose(std::span<const int32_t> output, std::span<const int32_t> prediction,
                      size_t& cursor, int k, std::vector<int32_t>& out);
};

// How many tokens to guess for a sequence this step, from what its guesses
// have been worth and what a guess costs. With acceptance p (the chance a
// guess is kept given the one before it was), k guesses yield
// E(k) = p + p^2 + ... + p^k extra tokens on average. In a step of b
// decoding sequences that takes D ms, k guesses add about k * v ms (v: a
// guessed token's share of a verify pass), so the step's tokens per ms
// change by the factor (1 + E(k) / b) / (1 + k v / D): the k in [0, k_max]
// that maximises it. A lone stream (b = 1, verify tokens nearly free while
// decode streams the weights) guesses long runs; sixteen streams whose step
// is compute-bound guess only what is nearly sure, or nothing: speculation
// turns itself off where it would slow the swarm.
class DraftLength {
 public:
  // Until the scheduler has timed verify passes: v / D.
  static constexpr double kDefaultCostRatio = 0.1;
  // After this many steps without a guess (k = 0 chosen), one guess is tried
  // anyway, so a sequence whose text became copyable again is noticed.
  static constexpr int kProbeAfter = 16;
  // How fast old verify outcomes fade (per guess position observed).
  static constexpr double kDecay = 0.9;

  // The length to guess: k_max at most, 0 for none.
  int choose(int k_max, int batch, double cost_ratio);
  // A verify of `guessed` tokens kept `accepted` of them.
  void observe(int guessed, int accepted);
  double acceptance() const { return kept_ / (kept_ + missed_); }

 private:
  double kept_ = 3, missed_ = 1;  // decayed counts (a prior of p = 0.75)
  int idle_ = 0;
};

}  // namespace tern::sched
