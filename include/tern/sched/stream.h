#pragma once
// The channel from the engine thread to one client stream.
//
// The scheduler (producer, engine thread) appends text pieces and finally one
// Finish; the session (consumer, reactor thread) drains everything pending in
// one go. The queue is bounded by construction: pieces that arrive while the
// consumer is busy are coalesced into one string, so a slow reader never makes
// a step wait and never grows a queue of events. The producer calls `notify`
// once per drain cycle (when the stream goes from "nothing pending" to
// "something pending"), outside the lock; the consumer must drain before it
// sleeps, which makes lost wake-ups impossible.
//
// Backpressure: text the consumer has not drained is bounded. Once
// kBacklogBytes are pending the stream is backlogged and the scheduler stops
// decoding its sequence (it keeps its KV and its batch slot) until a drain
// brings it back under the bound; the drain hook wakes the scheduler then.
//
// Cancellation flows the other way: the session calls Scheduler::cancel(),
// which sets the flag here and wakes the engine thread; the sequence is freed
// at the next token boundary.
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tern/sampling/logprobs.h"

namespace tern::sched {

enum class FinishReason : uint8_t {
  Stop,       // end-of-generation token or a stop string
  Length,     // max_tokens reached or the context is full
  Cancelled,  // client went away, sent a cancel, or the server is shutting down
  Error,      // the engine failed; Finish::error says why
};

const char* to_string(FinishReason r);

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose KV was reused (prefix cache)
  // Predicted Outputs: guesses from the request's prediction that the model
  // kept, and that it did not (OpenAI's completion_tokens_details).
  int accepted_prediction_tokens = 0;
  int rejected_prediction_tokens = 0;
};

// Per-request timings in the spirit of llama.cpp's `timings` object.
struct Timings {
  double queue_ms = 0;      // submit -> admitted
  double prompt_ms = 0;     // admitted -> first token sampled (prefill)
  double ttft_ms = 0;       // submit -> first token sampled
  double predicted_ms = 0;  // first token -> last token
  int prompt_n = 0;         // prompt tokens computed (prefilled)
  int cache_n = 0;          // prompt tokens reused from the prefix cache, all tiers
  int cache_dram_n = 0;     // ... of which found in DRAM
  int cache_flash_n = 0;    // ... of which reloaded from flash
  int preemptions = 0;      // times the request lost its KV to make room
  // Requests with a session key: the prompt tokens found in the cache (the
  // session's earlier turns, pinned, or anything shared); -1 without a key.
  int session_cache_n = -1;
  // Images whose embedding rows this request fetched (not counting images
  // inside a reused KV prefix), how many of them the embedding cache had,
  // and the time spent getting rows (encoding on a miss).
  int image_n = 0;
  int image_cache_hits = 0;
  double image_encode_ms = 0;
  // The same for audio clips.
  int audio_n = 0;
  int audio_cache_hits = 0;
  double audio_encode_ms = 0;
  int predicted_n = 0;  // tokens generated
  // Speculative decoding: tokens guessed (prompt lookup) and checked in a
  // verify pass, and how many of them the model agreed with.
  int draft_n = 0;
  int draft_accepted_n = 0;
  // Of those, the guesses drawn from the request's prediction (Predicted
  // Outputs): kept, and thrown away.
  int prediction_accepted_n = 0;
  int prediction_rejected_n = 0;
  // Why the generation ended early when the reason alone does not say
  // (e.g. "length" because the KV budget ran out, not max_tokens); "" otherwise.
  std::string finish_detail;
};

struct Finish {
  FinishReason reason = FinishReason::Stop;
  Usage usage;
  Timings timings;
  std::string error;  // set when reason == Error
  // The stop string that ended the generation (reason Stop); "" when it was
  // an end-of-generation token or anything else.
  std::string stop_string;
  // An embedding request (Request::pooling): its pooled vector (d_model
  // values, not normalised; for Rank the head's n_out outputs); empty for a
  // generation or on an error.
  std::vector<float> embedding;

  // A Finish with only its reason (and error) set.
  static Finish with(FinishReason reason, std::string error = {}) {
    Finish f;
    f.reason = reason;
    f.error = std::move(error);
    return f;
  }
};

// What one drain() returns: the text since the last drain and, at the end, the Finish.
struct StreamChunk {
  std::string text;
  int n_tokens = 0;  // tokens generated since the last drain
  // One entry per generated token since the last drain, when the request
  // asked for log probabilities (SamplingParams::logprobs >= 0).
  std::vector<TokenLogprob> logprobs;
  std::optional<Finish> finish;
  bool empty() const { return text.empty() && n_tokens == 0 && !finish; }
};

class Stream {
 public:
  using Notify = std::function<void()>;
  static constexpr size_t kBacklogBytes = 64 << 10;

  // `notify` is called from the engine thread; it must be cheap and thread-safe
  // (the server posts a wake-up to the session's executor).
  // backlog_bytes: pending text at which the stream counts as backlogged.
  explicit Stream(Notify notify, size_t backlog_bytes = kBacklogBytes)
      : notify_(std::move(notify)), backlog_bytes_(backlog_bytes) {}
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Producer side (engine thread).
  // lp: the log probabilities of the token just generated, or nullptr.
  void push(std::string_view text, int n_tokens, const TokenLogprob* lp = nullptr);
  void finish(Finish f);  // exactly once; later pushes are ignored

  // Consumer side (session): everything pending since the last drain.
  StreamChunk drain();
  bool finished() const;  // a Finish was pushed (it may not be drained yet)

  // Pending text has reached the backlog bound (thread-safe, lock-free).
  bool backlogged() const { return backlogged_.load(std::memory_order_acquire); }
  // Called (consumer thread, outside the lock) when a drain ends a backlog.
  // Set once, before the stream is shared (the scheduler does it on submit).
  void set_drain_hook(Notify hook) { drain_hook_ = std::move(hook); }

  // Cancellation flag: set by Scheduler::cancel(), read by the scheduler.
  void mark_cancelled() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  void signal(std::unique_lock<std::mutex>& lock);

  Notify notify_;
  const size_t backlog_bytes_;
  mutable std::mutex mu_;
  std::string text_;
  int n_tokens_ = 0;
  std::vector<TokenLogprob> logprobs_;
  std::optional<Finish> finish_;
  bool finished_ = false;
  bool signalled_ = false;  // a notify is outstanding since the last drain
  Notify drain_hook_;
  std::atomic<bool> backlogged_{false};
  std::atomic<bool> cancelled_{false};
};

}  // namespace tern::sched
