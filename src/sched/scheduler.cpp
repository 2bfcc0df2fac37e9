#include "tern/sched/scheduler.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "media_feed.h"
#include "sequence.h"
#include "step_budget.h"
#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/engine/engine.h"

namespace tern::sched {
namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = tern::log::get("sched");
  return l;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Scheduler::Scheduler(Engine& engine, SchedulerOptions opts, Metrics& metrics)
    : engine_(engine),
      opts_(opts),
      metrics_(metrics),
      costs_(std::make_unique<StepBudget>()),
      media_(
          std::make_unique<MediaFeed>(engine.config().d_model, engine.memory_budget(), metrics)) {
  if (opts_.max_batch < 1) throw InvalidArgument("max_batch must be at least 1");
  if (opts_.max_queue < 1) throw InvalidArgument("max_queue must be at least 1");
  if (opts_.step_tokens < opts_.max_batch)
    throw InvalidArgument("step_tokens (" + std::to_string(opts_.step_tokens) +
                          ") must be at least max_batch (" + std::to_string(opts_.max_batch) + ")");
  if (opts_.kv_tokens < 0) throw InvalidArgument("kv_tokens must be >= 0");
  if (!(opts_.session_ttl_s >= 0)) throw InvalidArgument("session_ttl_s must be >= 0");
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
  int32_t media_end = 0;
  for (const vision::MediaSpan& m : r.media) {
    if (m.pos < media_end || m.n <= 0 || m.row0 < 0 || int64_t(m.pos) + m.n > n || !m.image ||
        !m.source)
      throw InvalidArgument("request " + r.id +
                            ": image spans must lie inside the prompt, in order, without "
                            "overlapping, each with its image and a source of rows");
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
  for (auto& r : left) r.stream->finish(Finish{FinishReason::Cancelled, {}, {}, {}});
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

// Waits for work, applies cancellations to the waiting queue and picks what
// can be admitted now: preempted sequences (moved to readmit_) and new
// requests (moved to `admitted`). Returns false when the loop should end.
//
// Admission is fair between clients: the next candidate is the one whose
// client has the fewest sequences running (counting this round's), then
// preempted before new, then oldest. It needs a batch slot, a KV sequence
// slot, the optional token budget and free KV blocks for its whole context
// (the prefix cache may make it cheaper; preemption covers growth). When it
// does not fit and another client runs at least two more sequences, that
// client's newest sequence is preempted to make room; otherwise admission
// stops (nobody overtakes the candidate). When nothing runs, the candidate is
// admitted anyway: it gets the whole pool, and fails with a clear error if
// even that is too small.
bool Scheduler::take_work(std::vector<Request>& admitted) {
  admitted.clear();
  readmit_.clear();
  std::vector<Request> dropped;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] {
      return stop_ || cancel_all_ || wake_ || !queue_.empty() || runnable() ||
             !preempted_.empty() || media_->pending();
    });
    wake_ = false;
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

    const int64_t B = engine_.block_tokens();
    int64_t blocks = engine_.available_blocks();
    int64_t planned = 0;  // blocks of the sequences admitted this round (not taken yet)
    int64_t seq_slots = engine_.free_sequences();
    int64_t kv_used = kv_tokens_in_use();
    size_t taken = running_.size();
    auto blocks_for = [&](int64_t ctx_tokens) { return (ctx_tokens + 1 + B - 1) / B; };
    auto fits = [&](int64_t ctx_tokens) {
      if (taken >= size_t(opts_.max_batch) || seq_slots <= 0) return false;
      if (taken == 0) return true;
      if (opts_.kv_tokens > 0 && kv_used + ctx_tokens > opts_.kv_tokens) return false;
      return blocks_for(ctx_tokens) <= blocks;
    };
    // Running sequences per client (a small scratch list: clients are few).
    client_load_.clear();
    // References into it stay valid: it never grows past this.
    client_load_.reserve(running_.size() + preempted_.size() + queue_.size());
    auto load = [&](const std::string& client) -> int& {
      for (auto& [c, n] : client_load_)
        if (c == client) return n;
      return client_load_.emplace_back(client, 0).second;
    };
    for (const auto& s : running_)
      if (!s->done) load(s->req.client) += 1;

    for (;;) {
      // The best candidate: fewest running for its client, preempted first, oldest.
      int best_load = std::numeric_limits<int>::max();
      std::deque<std::unique_ptr<Sequence>>::iterator best_pre = preempted_.end();
      std::deque<Request>::iterator best_new = queue_.end();
      for (auto it = preempted_.begin(); it != preempted_.end(); ++it) {
        if ((*it)->req.stream->cancelled()) continue;  // retired by retire_cancelled
        const int l = load((*it)->req.client);
        if (l < best_load) best_load = l, best_pre = it;
      }
      for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        if (it->after && waits_for_sibling(*it, admitted)) continue;
        const int l = load(it->client);
        if (l < best_load) best_load = l, best_pre = preempted_.end(), best_new = it;
      }
      if (best_pre == preempted_.end() && best_new == queue_.end()) break;
      const bool is_pre = best_pre != preempted_.end();
      const std::string& client = is_pre ? (*best_pre)->req.client : best_new->client;
      const int64_t ctx_tokens =
          is_pre ? int64_t((*best_pre)->tokens.size()) : int64_t(best_new->prompt.size());
      if (!fits(ctx_tokens)) {
        // Fairness: the newest sequence of the busiest client yields its slot.
        Sequence* victim = nullptr;
        for (auto& r : running_) {
          if (r->done || !r->has_kv() || r->req.client == client) continue;
          if (load(r->req.client) < best_load + 2) continue;
          if (!victim || load(r->req.client) > load(victim->req.client) ||
              (load(r->req.client) == load(victim->req.client) && r->order > victim->order))
            victim = r.get();
        }
        if (!victim) break;
        const int64_t victim_tokens = int64_t(victim->tokens.size());
        load(victim->req.client) -= 1;
        preempt(*victim, "yielding its batch slot to another client");
        park_preempted();
        taken -= 1;
        seq_slots = engine_.free_sequences();
        kv_used -= victim_tokens;
        blocks = engine_.available_blocks();
        continue;  // the candidates changed: choose again
      }
      // Admission by bytes: a new request's image rows must fit the budget.
      if (!is_pre && !best_new->media.empty() && !best_new->media_charge) {
        if (!media_->reserve(*best_new, taken == 0)) {
          metrics_.mem_waits += 1;
          break;  // it waits; nobody overtakes it
        }
        // The rows may have taken KV room: what is left after this round's plans.
        blocks = engine_.available_blocks() - planned;
        if (taken > 0 && blocks_for(ctx_tokens) > blocks) {
          best_new->media_charge.reset();
          blocks = engine_.available_blocks() - planned;
          metrics_.mem_waits += 1;
          break;
        }
      }
      taken += 1;
      seq_slots -= 1;
      kv_used += ctx_tokens;
      blocks -= blocks_for(ctx_tokens);
      planned += blocks_for(ctx_tokens);
      load(client) += 1;
      if (is_pre) {
        readmit_.push_back(std::move(*best_pre));
        preempted_.erase(best_pre);
      } else {
        admitted.push_back(std::move(*best_new));
        queue_.erase(best_new);
      }
    }
    metrics_.queue_depth = int64_t(queue_.size());
    n_running_ = int64_t(running_.size() + preempted_.size() + readmit_.size() + admitted.size());
  }
  for (auto& r : dropped) {
    logger()->info("[{}] cancelled while waiting", r.id);
    metrics_.requests_cancelled += 1;
    Finish f{FinishReason::Cancelled, {}, {}, {}};
    f.usage.prompt_tokens = int(r.prompt.size());
    f.timings.queue_ms = ms_between(r.arrival, Clock::now());
    r.stream->finish(std::move(f));
  }
  return true;
}

bool Scheduler::waits_for_sibling(const Request& r, const std::vector<Request>& admitted) const {
  if (r.after->cancelled()) return false;
  for (const auto& q : queue_)
    if (q.stream == r.after) return true;
  for (const auto& q : admitted)
    if (q.stream == r.after) return true;
  for (const auto& s : running_)
    if (s->req.stream == r.after) return !s->done && s->in_kv < s->prompt_len();
  return false;  // finished, preempted or never seen: no reason to wait
}

// Gives s a KV sequence and attaches the longest cached prefix of its tokens.
void Scheduler::attach(Sequence& s) {
  // An image's positions are keyed by its content hash and which of its rows
  // they hold (at each span's first position; the chain carries it to every
  // later block), so KV is shared only between prompts with the same images
  // at the same places.
  kv::SeqKeys keys;
  keys.salt = lora_salt(s.req.lora);  // KV under one adapter is never reused under another
  for (const vision::MediaSpan& m : s.req.media) {
    Sha256 h;
    h.update("tern-media-span-v1").update(m.hash.data(), m.hash.size());
    h.update_u32(uint32_t(m.row0)).update_u32(uint32_t(m.n));
    keys.extras.push_back({m.pos, h.finish()});
  }
  s.seq = engine_.new_sequence(keys);
  const kv::KvStats before = engine_.cache_stats();
  s.in_kv = engine_.attach_prefix(s.seq, s.tokens);
  const kv::KvStats after = engine_.cache_stats();
  if (!s.started) {
    s.started = true;
    s.admitted = Clock::now();
    s.reused_dram = int(after.tokens_reused_dram - before.tokens_reused_dram);
    s.reused_flash = int(after.tokens_reused_flash - before.tokens_reused_flash);
  }
}

void Scheduler::start_sequences(std::vector<Request>& admitted) {
  // Preempted sequences first; running_ stays in admission order.
  for (auto& p : readmit_) {
    std::unique_ptr<Sequence> s = std::move(p);
    if (s->req.stream->cancelled()) {
      finish(*s, FinishReason::Cancelled);
      continue;
    }
    try {
      attach(*s);
      logger()->info("[{}] re-admitted after preemption: seq={} context={} tokens, {} reused",
                     s->req.id, s->seq, s->tokens.size(), s->in_kv);
    } catch (const std::exception& e) {
      if (s->seq >= 0) engine_.free_sequence(s->seq);
      s->seq = -1;
      logger()->error("[{}] could not resume: {}", s->req.id, e.what());
      finish(*s, FinishReason::Error, e.what());
      continue;
    }
    auto pos = std::find_if(running_.begin(), running_.end(),
                            [&](const auto& r) { return r->order > s->order; });
    running_.insert(pos, std::move(s));
  }
  readmit_.clear();
  for (auto& r : admitted) {
    const auto stream = r.stream;
    const std::string id = r.id;
    std::unique_ptr<Sequence> s;
    try {
      r.params.validate();
      s = std::make_unique<Sequence>(std::move(r), engine_.tokenizer(), n_vocab_, next_order_++);
      attach(*s);
      logger()->debug(
          "[{}] admitted: seq={} prompt={} tokens ({} from the prefix cache), waited {:.1f} ms", id,
          s->seq, s->prompt_len(), s->in_kv, ms_between(s->req.arrival, s->admitted));
      running_.push_back(std::move(s));
    } catch (const std::exception& e) {
      if (s && s->seq >= 0) engine_.free_sequence(s->seq);
      logger()->error("[{}] could not start: {}", id, e.what());
      metrics_.requests_failed += 1;
      stream->finish(Finish{FinishReason::Error, {}, {}, e.what()});
    }
  }
  admitted.clear();
}

void Scheduler::retire_cancelled() {
  for (auto& s : running_)
    if (!s->done && s->req.stream->cancelled()) finish(*s, FinishReason::Cancelled);
  for (auto it = preempted_.begin(); it != preempted_.end();) {
    if ((*it)->req.stream->cancelled()) {
      finish(**it, FinishReason::Cancelled);
      it = preempted_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace tern::sched
