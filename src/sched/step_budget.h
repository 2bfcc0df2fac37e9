#pragma once
// How much prompt a step may prefill while streams decode: a cost model of
// the forward pass, fitted online from the steps the scheduler times.
// Private to the scheduler; pure arithmetic (no clock), so tests feed it
// costs and check the chunk sizes it picks.
//
// A step with decodes costs
//     decode_ms                                     (the decode-only step)
//   + sum over prefill chunks of  a*n + b*n*(D + n/2)/1024 + c*D/1024
// for a chunk of n prompt tokens at depth D (tokens of that prompt already
// in the KV): a is a token's linear layers, b its attention over the
// context, c the pass over the context's KV that a chunk pays once however
// few tokens it has (at D = 4096 on SmolLM2-135M it is about one decode-only
// step by itself). decode_ms is an EWMA of decode-only steps; (a, b, c) are
// a least-squares fit, kept non-negative, of the time beyond decode_ms of
// the last kWindow steps that prefilled beside decodes and the last kShallow
// of them whose chunks were all shallow (< kShallowDepth): deep in a long
// prompt every chunk may be 2 tokens, which alone cannot tell a token's cost
// from the depth's, and the shallow ones keep what a short prompt costs (a
// slight ridge keeps the fit stable when the chunks all look alike). While
// a prompt is prefilled beside decodes, every kProbeEvery-th step is
// decode-only (a probe), so decode_ms follows the streams as their contexts
// grow and the machine's load changes instead of freezing at its value
// when the prompt arrived.
//
// The budget: a step with decodes should take at most slack x decode_ms, so
// the chunks get room_ms() = (slack - 1) x decode_ms; chunk_tokens() is the
// largest chunk whose predicted cost fits what is left of it.
#include <array>
#include <cstdint>
#include <vector>

namespace tern::sched {

// One prefill chunk of a step: n tokens appended at depth (tokens before them).
struct Chunk {
  int n = 0;
  int depth = 0;
};

class StepBudget {
 public:
  // Mixed steps between two decode-only probes (see above).
  static constexpr int kProbeEvery = 8;
  // Mixed steps the fit looks at, and how many it needs before it replaces
  // the per-token average.
  static constexpr int kWindow = 64;
  static constexpr int kShallow = 16;
  static constexpr int kShallowDepth = 256;
  static constexpr int kMinFitSteps = 6;

  // After a step: add_chunk() for each of its prefill chunks, then
  // observe() with its decode tokens and how long it took. A step without
  // decodes teaches nothing (no stream waits on it); one whose batch the
  // model does not describe (images) is passed with fit = false and only
  // counts toward the next probe.
  void add_chunk(int n, int depth) { step_.push_back({n, depth}); }
  void observe(int decodes, double ms, bool fit = true);

  bool ready() const { return decode_ms_ > 0 && (fitted() || token_ms_ > 0); }
  double decode_ms() const { return decode_ms_; }
  // The predicted time a chunk adds to a step with decodes (ms).
  double chunk_ms(int n, int depth) const;
  // The largest n in [1, max_n] with chunk_ms(n, depth) <= room_ms; 0 when
  // even one token does not fit.
  int chunk_tokens(double room_ms, int depth, int max_n) const;
  double room_ms(double slack) const { return (slack - 1.0) * decode_ms_; }
  // Whether this step should be decode-only, to measure decode_ms afresh.
  bool probe_due() const { return since_probe_ >= kProbeEvery; }

  // The fitted coefficients (ms): per token, per token x 1024 depth, per
  // chunk x 1024 depth; for logs and tests.
  std::array<double, 3> coefficients() const { return theta_; }
  bool fitted() const { return n_obs_ >= kMinFitSteps; }

 private:
  static std::array<double, 3> features(int n, int depth);
  void fit();

  std::vector<Chunk> step_;  // the chunks of the step being observed
  double decode_ms_ = 0;     // EWMA of decode-only steps
  double token_ms_ = 0;      // EWMA of a prompt token's extra cost: until the fit is ready
  std::array<double, 3> theta_{};
  // The last kWindow mixed steps: features (summed over chunks) and extra ms.
  std::array<std::array<double, 4>, kWindow> obs_{};
  int n_obs_ = 0;  // observed so far (the window holds min(n_obs_, kWindow))
  std::array<std::array<double, 4>, kShallow> shallow_{};  // the same, shallow steps only
  int n_shallow_ = 0;
  int since_probe_ = 0;  // mixed steps since the last decode-only one
};

// One paced step's room while its prefill chunks are sized, in plan order.
// A prompt's chunk is the largest that fits what is left of the room (the
// step's first chunk gets at least min_first tokens: prompts always
// progress), growing at most twofold from its prompt's last chunk. Short
// prompts (short_prompt: at most a step's tokens, none prefilled yet) go
// whole instead while together they cost at most kShortSteps rooms: a short
// request's first token comes one step after it is admitted, for one longer
// gap in the streams, even when other short prompts (a stream's next
// request) are planned before it.
class StepRoom {
 public:
  static constexpr double kShortSteps = 3.0;

  StepRoom(const StepBudget& costs, double room_ms, int min_first)
      : costs_(costs), room_(room_ms), short_room_(kShortSteps * room_ms), min_first_(min_first) {}

  // The chunk for a prompt with `pending` tokens left, `depth` of it in the
  // KV, at most max_n of them this step; 0 when nothing fits.
  int size(int max_n, int pending, int depth, int last_chunk, bool short_prompt) const;
  // Charges a planned chunk of n tokens at depth to the room.
  void take(int n, int depth);
  double left_ms() const { return room_; }

 private:
  const StepBudget& costs_;
  double room_;
  double short_room_;
  int min_first_;
  bool first_ = true;
};

}  // namespace tern::sched
