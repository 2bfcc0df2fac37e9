#pragma once
// Continuous batching at token boundaries.
//
// Admission by bytes: with a memory budget (Engine::memory_budget()), a
// request with images reserves its embedding rows' bytes at admission (the
// embedding cache, then unreferenced cached KV, give bytes back first); if
// they cannot fit now it waits in the queue (nobody overtakes it), and
// submit() refuses one that could never fit (InsufficientMemoryError).
//
// One engine thread runs steps. Each step it
//   1. drops cancelled requests (waiting ones never run; running ones free
//      their sequence),
//   2. admits waiting requests while the batch, the KV cache's free blocks
//      and the optional KV token budget allow, fairly between clients: the
//      next one admitted belongs to the client with the fewest running
//      (preempted sequences before new requests, FIFO within a client), and
//      when it does not fit, the newest sequence of a client running at
//      least two more yields its slot (preempted, never failed); an admitted
//      prompt reuses the KV of its longest cached prefix (automatic prefix
//      caching) and only its tail is computed,
//   3. builds ONE batch: a decode token for every running sequence whose
//      client keeps up with its stream (a backlogged stream pauses its
//      sequence), then prefill chunks of newly admitted prompts within a
//      per-step token budget (a long prompt never stalls everyone else's
//      decode; each client's oldest prompt goes before anyone's second; a
//      prompt whose next image has no rows yet stops before it and starts or
//      joins that image's encode), and
//      reserves KV blocks for it; when the pool has no room, the newest
//      sequence is preempted (its KV released to the prefix cache, where it
//      may spill to flash) and later re-admitted to recompute or reload it,
//   4. runs one forward pass (Engine::step, kernels on the task pool); a
//      sequence whose spilled KV could not be read is recomputed once, then
//      failed with the I/O error, without affecting the others. The pass
//      yields: when a short prompt arrives while the rest of the pass would
//      still take a while (a long prefill chunk; beside decodes, only a pass
//      longer than a paced step), it pauses after its current block (half
//      a layer), the newcomers are admitted and their whole prompts run in
//      a pass of their own (their first tokens go out), and the pass
//      resumes where it stopped; in a pass of prompts alone, the newcomers
//      then decode in further pauses at a paced step's pace (yield_round()).
//      With long_prompt_passes, a long prompt beside decoding streams gets
//      such passes of its own, the streams decoding in their pauses
//      (plan_long_pass()),
//   5. samples each sequence with its own Sampler, turns tokens into text
//      (UTF-8 safe, stop strings held back) and pushes it to its Stream,
//   6. retires finished sequences,
//   7. advances pending image encodes by a time slice: while streams decode,
//      what keeps step + slice within itl_slack decode-only steps (at least
//      one encode stage); otherwise at full speed. A finished encode's rows
//      go to the embedding cache and its waiting prompts resume.
// It sleeps on a condition variable when there is nothing to do; submit(),
// cancel() and stop() wake it. Nothing here polls. Submitters share one lock
// with it (mu_) only to queue and sweep: admission runs outside it, so no KV
// is freed while a submitter could wait.
//
// The parts, private to src/sched: admission.h (step 2's choices, a pure
// policy), media_feed.h (media rows and their encodes, steps 3 and 7),
// step_budget.h (step 3's prefill share); scheduler_step.cpp reads steps 3-5
// as plan -> reserve -> build the batch -> forward -> observe -> emit.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tern/model/batch.h"
#include "tern/sched/metrics.h"
#include "tern/sched/request.h"

namespace tern {
class Engine;
}

namespace tern::sched {

// The least a step prefills while streams decode (see itl_slack).
inline constexpr int kMinPrefillChunk = 2;
// The prompt a step beside decodes may take before the step cost model is ready.
inline constexpr int kLearnTokens = 64;

struct SchedulerOptions {
  int max_batch = 16;  // sequences decoding together (clamped to the engine's free sequences)
  int max_queue = 64;  // waiting requests beyond which submit() answers QueueFull
  // Tokens per forward pass (decode tokens + prefill chunks), >= max_batch.
  // With streams decoding the cost model (itl_slack) sizes the prefill share;
  // this caps steps without decodes and says which prompts are short. 512 on
  // a 2-core machine, bench/serve.py's heavy mix at 16 concurrent, against 64
  // (three runs each, alternated): 96.1 vs 88.2 out tok/s, goodput 0.25-0.33
  // vs 0.10-0.15 req/s, ITL p99 15-18 vs 16-21 ms. (64 was chosen before the
  // cost model existed, when this alone bounded a step beside decodes.)
  int step_tokens = 512;
  // With streams decoding, a step's prefill share is sized by a cost model
  // fitted online (src/sched/step_budget.h: per token, per token x depth,
  // per chunk x depth) so the step takes at most this multiple of a
  // decode-only step (their inter-token latency while a long prompt is
  // prefilled); at least kMinPrefillChunk tokens a step, so prompts always
  // progress, and a prompt of at most step_tokens may go whole in one step
  // when it costs no more than three steps' share (its first token then
  // comes one step after it arrives). 0: off (the whole step_tokens budget
  // every step).
  double itl_slack = 2.0;
  // While every prompt waiting beside decoding streams is long (more than
  // step_tokens in all, text), it runs in passes of its own and the streams
  // decode in their pauses once they have waited itl_slack's room
  // (Scheduler::plan_long_pass; needs yield_ms > 0). Off by default: on a
  // 2-vCPU Zen 3 it took a 4096-token prompt among 8 streams in 24-27 s
  // instead of 40-44 at the same stream gaps, and cut the heavy mix's p99
  // gap 91-437 -> 42-53 ms, but the heavy mix's median TTFT went 2.4-3.0 ->
  // 3.9-5.2 s: its short-lived streams decode in steps of their own (611
  // pauses, 19 % of a run) instead of riding in steps with prompt tokens
  // (bench/RESULTS.md).
  bool long_prompt_passes = false;
  // The same bound for embedding and rerank prompts beside decodes (the
  // smaller of the two applies to them): no stream waits on their first
  // token, so they take less of a step and the streams' p99 stays within 2x
  // idle (bench/embed_itl.py). Their throughput while streams decode is
  // what the room left gives; alone they run at the full step_tokens.
  double pooled_slack = 1.5;
  // A running pass yields to newly arrived short prompts (at most
  // step_tokens, text only, not embeddings) when what is left of it is
  // predicted to take longer than this (ms; beside decodes, also at least
  // two decode-only steps): it pauses after its current block (a layer's
  // FFN or a part of its attention: Model::forward), they run whole in a
  // pass of their own and get their first token, then it resumes. 0:
  // passes never yield.
  double yield_ms = 4.0;
  int64_t kv_tokens = 0;  // admit only while KV tokens in use + new prompt fit; 0: no limit
  // How long a finished request with a session key keeps its KV pinned in
  // DRAM (Request::session); 0: never pin.
  double session_ttl_s = 300;
  // Speculative decoding by prompt lookup (src/sched/drafter.h): a decoding
  // sequence whose last tokens occurred earlier in its context checks up to
  // draft_max guessed tokens in one verify entry; its sampler decides every
  // token as in plain decoding, so outputs are unchanged. Only while at most
  // spec_max_batch sequences decode (at batch 1-4 a decode step is bound by
  // weight traffic and verifying a few tokens more costs little). 0: off
  // (tern serve's --spec auto sets 16).
  int draft_max = 0;
  int spec_max_batch = 4;
  // What a guessed token costs over a decode-only step, for choosing each
  // sequence's guess length (DraftLength, src/sched/drafter.h). 0: measured
  // step by step. Tests pin it, so guess lengths do not depend on timing.
  double spec_cost_ratio = 0;
  // Where guesses come from after a request's prediction: Auto, prompt
  // lookup then the draft model; Ngram, prompt lookup only; Draft, the draft
  // model only. A request's own Request::spec_source narrows it.
  SpecSource spec_source = SpecSource::Auto;
  // A draft model (tern serve --draft-model): a smaller model with the same
  // vocabulary guessing k tokens by k greedy steps of its own, for every
  // guessing sequence in one batched pass (src/sched/model_drafter.h). Null:
  // none. It must outlive the scheduler and share the target's task pool.
  Engine* draft = nullptr;
};

class ModelDrafter;    // guesses from the draft model (src/sched/model_drafter.h)
class Sequence;        // engine-thread state of one running request (src/sched/sequence.h)
class MediaFeed;       // media rows and their encodes (src/sched/media_feed.h)
class StepBudget;      // the step cost model (src/sched/step_budget.h)
struct AdmissionRoom;  // what admission may hand out (src/sched/admission.h)

class Scheduler {
 public:
  // The engine must outlive the scheduler. Validates options (InvalidArgument).
  Scheduler(Engine& engine, SchedulerOptions opts, Metrics& metrics);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void start();  // launches the engine thread

  // Thread-safe. The one check of a prompt: throws PromptTooLongError when it
  // does not fit the context or the KV budget (even alone), InvalidArgument
  // for an empty prompt, a token outside the vocabulary or no stream. Never
  // blocks on a step.
  SubmitStatus submit(Request r);
  // The longest prompt submit() accepts (tokens).
  int max_prompt_tokens() const { return max_prompt_tokens_; }

  // Thread-safe: the request is dropped (waiting) or its sequence freed
  // (running) at the next token boundary; its stream then gets
  // Finish{Cancelled} unless it already finished.
  void cancel(const std::shared_ptr<Stream>& stream);

  // Graceful shutdown, in order: stop_accepting() (submit answers
  // ShuttingDown), wait for idle() (see set_idle_callback), cancel_all(), stop().
  void stop_accepting();
  void cancel_all();
  void stop();  // cancels everything left and joins the engine thread

  // No request waiting or running. Thread-safe.
  bool idle() const;
  // Thread-safe: runs task on the engine thread at the next token boundary
  // (between two steps), e.g. a snapshot of the KV cache. Tasks still queued
  // when the engine thread ends are dropped.
  void post(std::function<void()> task);

  // Called on the engine thread each time the scheduler becomes idle.
  void set_idle_callback(std::function<void()> fn);

  int n_ctx() const { return n_ctx_; }
  const SchedulerOptions& options() const { return opts_; }

 private:
  void loop();

  // Admission (scheduler.cpp; the policy is src/sched/admission.h).
  bool take_work(std::vector<Request>& admitted);  // false: stop
  // take_work's scratch, reused between rounds (scheduler.cpp).
  struct Round;
  // Under mu_: sleeps until there is work, applies cancellations to the
  // queue (the cancelled requests move to `dropped`) and lists the rest in
  // round_. False: the loop should end.
  bool wait_for_work(std::vector<Request>& dropped);
  // Outside mu_: picks what is admitted now, preempting to make room.
  // Preempted sequences move to readmit_, new requests to round.chosen.
  void admit(Round& round);
  void snapshot(Round& round) const;     // round.snap, for the admission policy
  AdmissionRoom admission_room() const;  // what admission may hand out now
  // Reserves a new request's media bytes (MediaFeed::reserve) and checks its
  // KV still fits after the rows took their room. False: it waits.
  bool charge_media(Request& r, int64_t tokens, AdmissionRoom& room);
  // r names a sibling (Request::after) whose prompt is not in the KV yet
  // (waiting, chosen this round, or prefilling). Engine thread.
  bool waits_for_sibling(const Request& r, const std::vector<Request*>& waiting) const;
  bool runnable() const;

  // The step (scheduler_step.cpp): plan -> reserve -> build the batch ->
  // forward -> observe -> emit.
  void run_step();
  void plan_step();                                // plan_: decodes, then prefill chunks
  void plan_prefill(size_t n_decode, int budget);  // plan_step's prefill chunks
  bool plan_long_pass();                           // or a long prompt's own pass
  // A prompt whose whole prefill, done and to do, is at most step_tokens.
  bool short_prompt(const Sequence& s) const;
  int plan_draft(Sequence& s, int budget);  // a decoding sequence's guesses
  void plan_model_drafts(int& budget);      // the draft model's, in one pass
  void forget_drafts();                     // draft KV of sequences no longer running is freed
  void reserve_step();                      // KV room for plan_, oldest first
  bool build_batch();                       // batch_ from plan_; false: empty
  // false: the pass failed (and so did its sequences). may_yield: the pass
  // may pause for a yield_round().
  bool forward(bool may_yield);
  // Whether the running pass should pause after `block` of n_blocks
  // (Engine::YieldCheck).
  bool should_yield(int block, int n_blocks);
  // During a paused pass: admits the short prompts that arrived
  // (take_yield_requests) and runs them whole, with a decode for every
  // sequence outside the paused pass that decodes, in a pass of their own.
  void yield_round();
  void take_yield_requests(std::vector<Request>& admitted);
  void swap_step_buffers();  // the paused pass's buffers <-> the yield round's
  // The step's metrics and its cost for the model (t0, t1: the forward pass).
  void observe_step(Clock::time_point t0, Clock::time_point t1);
  void observe_costs(double ms);  // the cost model's part of it (and a pause's)
  void trace_step(Clock::time_point t0) const;
  void emit_step();  // KV positions advance, tokens are sampled and streamed
  void emit_verified(Sequence& s, int entry);  // a verify entry's tokens and KV
  // Tokens of s's next n that can run now (MediaFeed::ready). 0 when s
  // failed on media that cannot be had (it finishes with the error).
  int media_ready(Sequence& s, int n);
  void advance_media();

  // Sequences' lives (scheduler_seq.cpp): start, KV room, preemption,
  // tokens out, finish, retire.
  void start_sequences(std::vector<Request>& admitted);
  void attach(Sequence& s);
  void retire_cancelled();
  bool reserve_for(Sequence& s, int n);
  void preempt(Sequence& s, const char* why);
  void kv_failed(Sequence& s, std::string why);
  void park_preempted();
  void emit_token(Sequence& s, int32_t token);
  void finish(Sequence& s, FinishReason reason, std::string error = {}, std::string detail = {});
  void finish_embedding(Sequence& s);
  void retire_finished();  // those done, but none in a paused pass (Sequence::in_pass)
  void update_gauges();
  int64_t kv_tokens_in_use() const;

  Engine& engine_;
  SchedulerOptions opts_;
  Metrics& metrics_;
  int n_ctx_ = 0;
  int n_vocab_ = 0;
  int max_prompt_tokens_ = 0;
  int64_t kv_capacity_tokens_ = 0;  // what one sequence can hold in the KV budget
  size_t kv_block_bytes_ = 0;       // one KV block, all layers
  int engine_block_tokens_ = 32;    // tokens per KV block
  size_t mem_fixed_bytes_ = 0;      // of the memory budget, held for good (flash staging)

  // Shared with submitters, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Submitters only append; the engine thread alone takes requests out. So
  // the requests wait_for_work lists stay where they are (a deque's
  // push_back keeps references valid) while admit() reads them outside mu_.
  std::deque<Request> queue_;
  bool accepting_ = true;
  bool cancel_all_ = false;
  bool stop_ = false;
  bool wake_ = false;      // a cancel arrived
  int64_t n_running_ = 0;  // mirror of running_.size() for idle()
  std::function<void()> idle_callback_;
  std::vector<std::function<void()>> tasks_;  // post()ed, run by loop()

  // Engine-thread state.
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  // Preempted sequences waiting to be re-admitted, oldest admission first;
  // they go before any new request. Read under mu_ by wait_for_work's predicate.
  std::deque<std::unique_ptr<Sequence>> preempted_;
  std::vector<std::unique_ptr<Sequence>> readmit_;  // preempted ones take_work admitted
  uint64_t next_order_ = 0;                         // admission counter
  // Yielding (should_yield): submit() counts arrivals; a pass yields for
  // arrivals it has not seen, when what is left of it is worth the pause.
  std::atomic<uint64_t> arrivals_{0};
  uint64_t yield_seen_ = 0;
  Clock::time_point pass_t0_{};       // when the pass (or its resumed part) started
  int pass_first_block_ = 0;          // and at which block (half a layer)
  bool pass_yielded_ = false;         // the pass paused for arrivals already
  int step_decodes_ = 0;              // decode entries of the step being run
  bool last_shorts_only_ = false;     // the last step was short prompts' alone (plan_prefill)
  int outside_decodes_ = 0;           // sequences decoding outside the paused pass
  int pulled_decodes_ = 0;            // streams left to its pauses (plan_long_pass)
  bool outside_prefill_ = false;      // a pause left a short prompt half prefilled
  Clock::time_point outside_step_{};  // when their last step (a yield round's) ended
  Clock::duration yielded_{};         // time the step spent paused (not its cost)
  struct StepBuffers;                 // a paused pass's batch and outputs (scheduler_step.cpp)
  std::unique_ptr<StepBuffers> aside_;
  Batch batch_;  // reused every step: no allocation in steady state
  StepOutput out_;
  std::vector<Sequence*> entry_seq_;                          // (batch entries) whose entry it is
  std::vector<std::pair<Sequence*, int>> plan_, plan_order_;  // this step's (sequence, tokens)
  std::vector<int32_t> draft_;                                // plan_draft's scratch
  std::unique_ptr<ModelDrafter> model_drafter_;               // SchedulerOptions::draft
  // This step's sequences that wait for the draft model's guesses, the
  // tokens each set aside for them, and the live keys (admission orders).
  std::vector<std::pair<Sequence*, int>> model_wants_;
  std::vector<uint64_t> live_keys_;
  // This step's embedding runs (images), and each entry's [first, end) of them.
  std::vector<EmbeddingRun> runs_;
  std::vector<std::pair<size_t, size_t>> entry_runs_;
  // The step cost model that sizes the prefill share while streams decode
  // (SchedulerOptions::itl_slack; src/sched/step_budget.h).
  std::unique_ptr<StepBudget> costs_;
  double last_step_ms_ = 0;    // the last step's duration
  int last_step_decodes_ = 0;  // and its decode tokens
  // Speculation's costs: the ms a guessed token adds to a step (EWMA over
  // steps of decodes and verifies only), and this step's decoding sequences.
  double verify_token_ms_ = 0;
  int spec_batch_ = 0;
  Clock::time_point prev_step_end_{};  // when the last step ended (trace log)
  std::unique_ptr<MediaFeed> media_;
  std::unique_ptr<Round> round_;
  std::thread thread_;

  // What stream drain hooks call: streams may outlive the scheduler, so the
  // hook reaches it only through this, which the destructor switches off.
  struct WakeLine {
    std::mutex mu;
    Scheduler* scheduler = nullptr;  // null once the scheduler is gone
  };
  std::shared_ptr<WakeLine> wake_line_ = std::make_shared<WakeLine>();
  void wake();
};

}  // namespace tern::sched
