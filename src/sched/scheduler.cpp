#include "tern/sched/scheduler.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>

#include "admission.h"
#include "media_feed.h"
#include "model_drafter.h"
#include "sched_log.h"
#include "sequence.h"
#include "step_budget.h"
#include "step_buffers.h"
#include "tern/core/error.h"
#include "tern/engine/engine.h"

namespace tern::sched {
// take_work's scratch, kept between rounds so that a round allocates nothing
// in steady state.
struct Scheduler::Round {
  std::vector<Request*> waiting;  // the queue as wait_for_work listed it
  std::vector<size_t> chosen;     // new requests admitted (indices into waiting), in order
  AdmissionSnapshot snap;
};

Scheduler::Scheduler(Engine& engine, SchedulerOptions opts, Metrics& metrics)
    : engine_(engine),
      opts_(opts),
      metrics_(metrics),
      costs_(std::make_unique<StepBudget>()),
      media_(std::make_unique<MediaFeed>(engine.config().d_model, engine.memory_budget(), metrics)),
      round_(std::make_unique<Round>()) {
  aside_ = std::make_unique<StepBuffers>();
  if (opts_.max_batch < 1) throw InvalidArgument("max_batch must be at least 1");
  if (opts_.max_queue < 1) throw InvalidArgument("max_queue must be at least 1");
  if (opts_.step_tokens < opts_.max_batch)
    throw InvalidArgument("step_tokens (" + std::to_string(opts_.step_tokens) +
                          ") must be at least max_batch (" + std::to_string(opts_.max_batch) + ")");
  if (opts_.kv_tokens < 0) throw InvalidArgument("kv_tokens must be >= 0");
  if (!(opts_.session_ttl_s >= 0)) throw InvalidArgument("session_ttl_s must be >= 0");
  if (!(opts_.yield_ms >= 0)) throw InvalidArgument("yield_ms must be >= 0");
  if (opts_.draft) {
    if (const std::string why = vocabulary_mismatch(engine_.tokenizer(), opts_.draft->tokenizer());
        !why.empty())
      throw InvalidArgument("the draft model's vocabulary differs from the model's: " + why);
    if (!opts_.draft->config().generates())
      throw InvalidArgument("the draft model only embeds: it cannot guess tokens");
    if (&opts_.draft->pool() != &engine_.pool())
      throw InvalidArgument("the draft model must run on the model's task pool");
    model_drafter_ = std::make_unique<ModelDrafter>(*opts_.draft);
  }
  n_ctx_ = engine_.n_ctx();
  n_vocab_ = engine_.n_vocab();
  engine_block_tokens_ = engine_.block_tokens();
  const int64_t seqs = engine_.free_sequences();
  metrics_.kv_sequences_capacity = seqs;
  const kv::KvStats st = engine_.cache_stats();
  metrics_.kv_tokens_capacity =
      opts_.kv_tokens > 0 ? opts_.kv_tokens : st.dram_blocks * st.block_tokens;
  metrics_.set_kv(st);
  running_.reserve(size_t(opts_.max_batch));
  wake_line_->scheduler = this;
  // A prompt of P tokens needs KV for P + 1 (its first generated token is fed
  // back), in whole blocks, and must leave the context room for that token.
  kv_capacity_tokens_ = engine_.capacity_blocks() * st.block_tokens - 1;
  kv_block_bytes_ = size_t(st.block_bytes);
  if (const MemoryBudget* mb = engine_.memory_budget()) {
    metrics_.budget = mb;
    const size_t frames = size_t(st.dram_blocks - st.dram_free) * kv_block_bytes_;
    const size_t kv = mb->used(MemPool::Kv);
    mem_fixed_bytes_ = kv > frames ? kv - frames : 0;
  }
  int64_t limit = std::min<int64_t>(n_ctx_ - 1, kv_capacity_tokens_);
  if (opts_.kv_tokens > 0) limit = std::min(limit, opts_.kv_tokens);
  max_prompt_tokens_ = int(std::max<int64_t>(0, limit));
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(wake_line_->mu);
    wake_line_->scheduler = nullptr;
  }
  stop();
}

void Scheduler::wake() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  cv_.notify_one();
}

void Scheduler::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { loop(); });
}

SubmitStatus Scheduler::submit(Request r) {
  if (!r.stream) throw InvalidArgument("request " + r.id + " has no stream");
  if (r.prompt.empty()) throw InvalidArgument("The prompt is empty after tokenization.");
  const int64_t n = int64_t(r.prompt.size());
  if (n > max_prompt_tokens_) {
    const std::string got = " However, your prompt resulted in " + std::to_string(n) + " tokens";
    if (n >= n_ctx_)
      throw PromptTooLongError("This model's maximum context length is " + std::to_string(n_ctx_) +
                               " tokens." + got + ". Please reduce the length of the prompt.");
    if (opts_.kv_tokens > 0 && n > opts_.kv_tokens)
      throw PromptTooLongError("The server's KV token budget (--kv-tokens) is " +
                               std::to_string(opts_.kv_tokens) + " tokens." + got + ".");
    throw PromptTooLongError(
        "The server's KV cache budget (--kv-dram-mb, --kv-staging-mb) holds at most " +
        std::to_string(kv_capacity_tokens_ + 1) + " tokens of one sequence." + got +
        " (plus one to generate); it could never run. Please reduce the length of the prompt.");
  }
  for (int32_t t : r.prompt)
    if (t < 0 || t >= n_vocab_)
      throw InvalidArgument("token id " + std::to_string(t) + " is outside the vocabulary");
  if (r.pooling == Pooling::None && !engine_.config().generates())
    throw InvalidArgument("request " + r.id + ": " + engine_.config().arch +
                          " is an embedding model; it cannot generate text");
  if (r.pooling != Pooling::None && !r.media.empty())
    throw InvalidArgument("request " + r.id + ": an embedding takes no images or audio");
  if (r.pooling == Pooling::Rank && !engine_.rank_head())
    throw InvalidArgument("request " + r.id +
                          ": rank pooling needs a model with a classification head");
  int32_t media_end = 0;
  for (const vision::MediaSpan& m : r.media) {
    if (m.pos < media_end || m.n <= 0 || m.row0 < 0 || int64_t(m.pos) + m.n > n ||
        (!m.image && !m.audio) || !m.source)
      throw InvalidArgument("request " + r.id +
                            ": media spans must lie inside the prompt, in order, without "
                            "overlapping, each with its image or audio clip and a source of rows");
    media_end = m.pos + m.n;
  }
  if (const MemoryBudget* mb = engine_.memory_budget(); mb && !r.media.empty()) {
    const size_t blocks = size_t(n + 1 + engine_block_tokens_ - 1) / size_t(engine_block_tokens_);
    const size_t need = media_->bytes(r) + blocks * kv_block_bytes_;
    const size_t room = mb->total() > mem_fixed_bytes_ ? mb->total() - mem_fixed_bytes_ : 0;
    if (need > room) {
      metrics_.mem_refused += 1;
      throw InsufficientMemoryError(
          "This request needs " + std::to_string((need + (1 << 20) - 1) >> 20) +
          " MiB of memory (its images' embeddings and its prompt's KV cache), more than the "
          "server's memory budget holds (" +
          std::to_string(room >> 20) + " MiB; --mem-budget-mb). Send fewer or smaller images.");
    }
  }
  for (const auto& [t, bias] : r.params.logit_bias)
    if (t >= n_vocab_)
      throw InvalidArgument("logit_bias: token id " + std::to_string(t) +
                            " is outside the vocabulary");
  // A drain that ends a backlog makes its paused sequence runnable again.
  r.stream->set_drain_hook([line = wake_line_] {
    std::lock_guard lock(line->mu);
    if (line->scheduler) line->scheduler->wake();
  });
  {
    std::lock_guard lock(mu_);
    if (!accepting_) {
      metrics_.requests_rejected += 1;
      return SubmitStatus::ShuttingDown;
    }
    if (int64_t(queue_.size()) >= opts_.max_queue) {
      metrics_.requests_rejected += 1;
      return SubmitStatus::QueueFull;
    }
    queue_.push_back(std::move(r));
    metrics_.queue_depth = int64_t(queue_.size());
    metrics_.requests_submitted += 1;
    arrivals_.fetch_add(1, std::memory_order_relaxed);  // a running pass may yield to it
  }
  cv_.notify_one();
  return SubmitStatus::Accepted;
}

void Scheduler::cancel(const std::shared_ptr<Stream>& stream) {
  if (!stream || stream->finished()) return;
  stream->mark_cancelled();
  wake();
}

void Scheduler::stop_accepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

void Scheduler::cancel_all() {
  {
    std::lock_guard lock(mu_);
    cancel_all_ = true;
  }
  cv_.notify_one();
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    cancel_all_ = true;
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  // Requests submitted to a scheduler whose thread never ran.
  std::deque<Request> left;
  {
    std::lock_guard lock(mu_);
    left.swap(queue_);
  }
  for (auto& r : left) r.stream->finish(Finish::with(FinishReason::Cancelled));
}

bool Scheduler::idle() const {
  std::lock_guard lock(mu_);
  return queue_.empty() && n_running_ == 0;
}

void Scheduler::post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
    wake_ = true;
  }
  cv_.notify_one();
}

void Scheduler::set_idle_callback(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  idle_callback_ = std::move(fn);
}

void Scheduler::loop() {
  logger()->debug("engine thread started: max_batch={} step_tokens={} n_ctx={}", opts_.max_batch,
                  opts_.step_tokens, n_ctx_);
  std::vector<Request> admitted;
  std::vector<std::function<void()>> tasks;
  while (take_work(admitted)) {
    {
      std::lock_guard lock(mu_);
      tasks.swap(tasks_);
    }
    for (auto& t : tasks) t();
    tasks.clear();
    start_sequences(admitted);
    update_gauges();  // admitted sequences count as running before their first token
    retire_cancelled();
    run_step();
    retire_finished();
    forget_drafts();
    advance_media();
    update_gauges();
    std::function<void()> on_idle;
    {
      std::lock_guard lock(mu_);
      n_running_ = int64_t(running_.size() + preempted_.size());
      if (running_.empty() && preempted_.empty() && queue_.empty()) on_idle = idle_callback_;
    }
    if (on_idle) on_idle();
  }
  logger()->debug("engine thread stopped");
}

// Whether a step would do anything: a running sequence with tokens to
// prefill, or one to decode whose stream is not backlogged.
bool Scheduler::runnable() const {
  for (const auto& s : running_)
    if (!s->done && (s->pending() > 1 || !s->req.stream->backlogged())) return true;
  return false;
}

// Waits for work, applies cancellations to the waiting queue and admits what
// fits now: preempted sequences (moved to readmit_) and new requests (moved
// to `admitted`). Returns false when the loop should end.
//
// In three phases, so that no KV is freed under mu_ (yielding a slot
// preempts a sequence) and submitters never wait on the engine: under mu_
// the queue is swept and listed (wait_for_work); outside it admit() applies
// the admission policy (admission.h); under mu_ again the chosen requests
// leave the queue. Meanwhile submitters may only append to the queue.
bool Scheduler::take_work(std::vector<Request>& admitted) {
  admitted.clear();
  readmit_.clear();
  Round& round = *round_;
  std::vector<Request> dropped;
  const bool go = wait_for_work(dropped);
  if (go) {
    admit(round);
    std::lock_guard lock(mu_);
    // Moved out in admission order, then erased from the back, which keeps
    // the other indices valid.
    for (size_t i : round.chosen) admitted.push_back(std::move(queue_[i]));
    std::sort(round.chosen.begin(), round.chosen.end(), std::greater<>());
    for (size_t i : round.chosen) queue_.erase(queue_.begin() + std::ptrdiff_t(i));
    metrics_.queue_depth = int64_t(queue_.size());
    n_running_ = int64_t(running_.size() + preempted_.size() + readmit_.size() + admitted.size());
  }
  // Even when the loop ends: stop() never sees these again (they left the queue).
  for (auto& r : dropped) {
    logger()->info("[{}] cancelled while waiting", r.id);
    metrics_.requests_cancelled += 1;
    Finish f = Finish::with(FinishReason::Cancelled);
    f.usage.prompt_tokens = int(r.prompt.size());
    f.timings.queue_ms = ms_between(r.arrival, Clock::now());
    r.stream->finish(std::move(f));
  }
  return go;
}

bool Scheduler::wait_for_work(std::vector<Request>& dropped) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] {
    return stop_ || cancel_all_ || wake_ || !queue_.empty() || runnable() || !preempted_.empty() ||
           media_->pending();
  });
  wake_ = false;
  // What arrives after this look at the queue may make the step yield.
  yield_seen_ = arrivals_.load(std::memory_order_relaxed);
  if (cancel_all_) {
    cancel_all_ = false;
    for (auto& r : queue_) r.stream->mark_cancelled();
    for (auto& s : running_) s->req.stream->mark_cancelled();
    for (auto& s : preempted_) s->req.stream->mark_cancelled();
  }
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->stream->cancelled()) {
      dropped.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  if (stop_ && queue_.empty() && running_.empty() && preempted_.empty()) return false;
  round_->waiting.clear();
  for (Request& r : queue_) round_->waiting.push_back(&r);
  return true;
}

// Each admission needs a batch slot, a KV sequence slot, the optional token
// budget and free KV blocks for the candidate's whole context (the prefix
// cache may make it cheaper; preemption covers growth), and for a new
// request with images their rows' bytes in the memory budget.
AdmissionRoom Scheduler::admission_room() const {
  AdmissionRoom room;
  room.max_batch = opts_.max_batch;
  room.block_tokens = engine_.block_tokens();
  room.taken = int64_t(running_.size());
  room.seq_slots = engine_.free_sequences();
  room.kv_budget = opts_.kv_tokens;
  room.kv_used = kv_tokens_in_use();
  room.blocks = engine_.available_blocks();
  return room;
}

void Scheduler::admit(Round& round) {
  round.chosen.clear();
  AdmissionRoom room = admission_room();
  for (;;) {
    snapshot(round);
    const std::optional<size_t> c = next_candidate(round.snap);
    if (!c) break;
    const AdmissionSnapshot::Waiting w = round.snap.waiting[*c];
    if (!room.fits(w.tokens)) {
      const std::optional<size_t> v = yield_victim(round.snap, *c);
      if (!v) break;  // nobody overtakes the candidate
      Sequence& victim = *running_[round.snap.running[*v].ref];
      room.kv_used -= int64_t(victim.tokens.size());
      room.taken -= 1;
      preempt(victim, "yielding its batch slot to another client");
      park_preempted();
      room.seq_slots = engine_.free_sequences();
      room.blocks = engine_.available_blocks();
      continue;  // the candidates changed: choose again
    }
    if (!w.preempted && !charge_media(*round.waiting[w.ref], w.tokens, room)) {
      metrics_.mem_waits += 1;
      break;  // it waits; nobody overtakes it
    }
    room.take(w.tokens);
    if (w.preempted) {
      readmit_.push_back(std::move(preempted_[w.ref]));
      preempted_.erase(preempted_.begin() + std::ptrdiff_t(w.ref));
    } else {
      round.chosen.push_back(w.ref);
    }
  }
}

// What the policy sees: running sequences (with this round's admissions,
// which cannot yield), then the preempted ones and the queue not yet chosen.
void Scheduler::snapshot(Round& round) const {
  AdmissionSnapshot& snap = round.snap;
  snap.clear();
  for (size_t i = 0; i < running_.size(); ++i) {
    const Sequence& s = *running_[i];
    if (!s.done)
      snap.running.push_back(
          {.client = s.req.client, .order = s.order, .can_yield = s.has_kv(), .ref = i});
  }
  for (const auto& s : readmit_)
    snap.running.push_back({.client = s->req.client, .order = s->order});
  for (size_t i : round.chosen) snap.running.push_back({.client = round.waiting[i]->client});
  for (size_t i = 0; i < preempted_.size(); ++i) {
    const Sequence& s = *preempted_[i];
    snap.waiting.push_back({.client = s.req.client,
                            .order = s.order,
                            .tokens = int64_t(s.tokens.size()),
                            .preempted = true,
                            .held = s.req.stream->cancelled(),  // retired by retire_cancelled
                            .ref = i});
  }
  for (size_t i = 0; i < round.waiting.size(); ++i) {
    if (std::find(round.chosen.begin(), round.chosen.end(), i) != round.chosen.end()) continue;
    const Request& r = *round.waiting[i];
    snap.waiting.push_back({.client = r.client,
                            .order = i,
                            .tokens = int64_t(r.prompt.size()),
                            .held = r.after && waits_for_sibling(r, round.waiting),
                            .ref = i});
  }
}

bool Scheduler::charge_media(Request& r, int64_t tokens, AdmissionRoom& room) {
  if (r.media.empty() || r.media_charge) return true;
  if (!media_->reserve(r, room.taken == 0)) return false;
  // The rows may have taken KV room: what is left after this round's plans.
  room.blocks = engine_.available_blocks() - room.planned;
  if (room.taken > 0 && room.blocks_for(tokens) > room.blocks) {
    r.media_charge.reset();
    room.blocks = engine_.available_blocks() - room.planned;
    return false;
  }
  return true;
}

bool Scheduler::waits_for_sibling(const Request& r, const std::vector<Request*>& waiting) const {
  if (r.after->cancelled()) return false;
  for (const Request* q : waiting)  // still queued, or chosen this round
    if (q->stream == r.after) return true;
  for (const auto& s : running_)
    if (s->req.stream == r.after) return !s->done && s->in_kv < s->prompt_len();
  return false;  // finished, preempted or never seen: no reason to wait
}

}  // namespace tern::sched
