// The token-boundary step: build one batch, run one forward pass, sample,
// stream text, retire. Runs on the engine thread only.
#include <algorithm>
#include <chrono>
#include <iterator>

#include "media_feed.h"
#include "sequence.h"
#include "step_budget.h"
#include "tern/core/log.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::sched {
namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = tern::log::get("sched");
  return l;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int Scheduler::media_ready(Sequence& s, int n) {
  try {
    return media_->ready(s, n);
  } catch (const std::exception& e) {
    logger()->error("[{}] image: {}", s.req.id, e.what());
    finish(s, FinishReason::Error, e.what());
    return 0;
  }
}

// After a step: the pending media encodes get a time slice. While streams
// decode, step + slice stay within itl_slack decode-only steps (the encode
// gets at least one stage, so it always progresses); otherwise full speed.
void Scheduler::advance_media() {
  if (!media_->pending()) return;
  constexpr double kFullSpeedSliceMs = 200;  // between looks at new work
  double budget = kFullSpeedSliceMs;
  if (last_step_decodes_ > 0 && opts_.itl_slack > 0) {
    const double decode = costs_->decode_ms() > 0 ? costs_->decode_ms() : last_step_ms_;
    budget = opts_.itl_slack * decode - last_step_ms_;
  }
  media_->advance(engine_.pool(), budget);
}

// Makes room in the KV cache for n more tokens of s. When the pool is full
// (or spilling to make room failed: disk full, write error), preempts the
// newest running sequence (possibly s itself) and retries; a sequence alone
// that still does not fit ends: with "length" and its text when it was
// generating, with an error otherwise. Returns whether s may run.
bool Scheduler::reserve_for(Sequence& s, int n) {
  for (;;) {
    const Engine::Reservation r = engine_.reserve(s.seq, n);
    switch (r.room) {
      case Engine::Room::Ok:
        return true;
      case Engine::Room::Lost:  // a flash read s depends on failed
        kv_failed(s, r.why);
        return false;
      case Engine::Room::Invalid:
        finish(s, FinishReason::Error, r.why);
        return false;
      case Engine::Room::Full:
      case Engine::Room::SpillFailed:
        break;
    }
    const bool full = r.room == Engine::Room::Full;
    Sequence* victim = nullptr;
    int with_kv = 0;
    for (auto& q : running_) {
      if (q->done || !q->has_kv()) continue;
      ++with_kv;
      if (!victim || q->order > victim->order) victim = q.get();
    }
    if (with_kv > 1) {
      preempt(*victim, r.why.c_str());
      if (victim == &s) return false;
      continue;
    }
    if (full && s.n_generated > 0) {
      // Out of room, alone: the generation ends here, keeping what it produced
      // (OpenAI's "length": no room to continue).
      logger()->warn("[{}] stopped at {} tokens: {} (nothing left to preempt)", s.req.id,
                     s.tokens.size(), r.why);
      finish(s, FinishReason::Length, {},
             "KV cache full at " + std::to_string(s.tokens.size()) +
                 " tokens: the KV budget (--kv-dram-mb, --kv-staging-mb) holds no more for this "
                 "sequence");
      return false;
    }
    finish(s, FinishReason::Error,
           r.why + (full ? " (nothing left to preempt; raise --kv-dram-mb)" : ""));
    return false;
  }
}

// Releases s's KV (its full blocks stay in the prefix cache, spilling to
// flash under pressure) and parks it until it can be re-admitted.
void Scheduler::preempt(Sequence& s, const char* why) {
  logger()->info("[{}] preempted at {} tokens: {}", s.req.id, s.tokens.size(), why);
  engine_.free_sequence(s.seq);
  s.seq = -1;
  s.in_kv = 0;
  s.preemptions += 1;
  metrics_.preemptions += 1;
}

// A flash read or write that s depended on failed: its KV is incomplete.
// Recompute it once from the prompt (the failed blocks are never reused);
// fail the request with the I/O error if it happens again.
void Scheduler::kv_failed(
    Sequence& s, std::string why) {  // by value: a reference into the KV dies with the sequence
  metrics_.kv_io_failures += 1;
  if (s.io_retries == 0) {
    s.io_retries += 1;
    logger()->warn("[{}] KV lost to a flash-tier error, recomputing: {}", s.req.id, why);
    preempt(s, "flash-tier error");
    return;
  }
  logger()->error("[{}] KV lost to a flash-tier error again: {}", s.req.id, why);
  engine_.free_sequence(s.seq);
  s.seq = -1;
  finish(s, FinishReason::Error, std::move(why));
}

// Moves preempted sequences from running_ to preempted_, keeping both in
// admission order.
void Scheduler::park_preempted() {
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->done || (*it)->has_kv()) {
      ++it;
      continue;
    }
    auto pos = std::find_if(preempted_.begin(), preempted_.end(),
                            [&](const auto& p) { return p->order > (*it)->order; });
    preempted_.insert(pos, std::move(*it));
    it = running_.erase(it);
  }
}

// Appends to plan_ (after its n_decode decode entries) this step's prefill
// chunks within `budget` tokens.
void Scheduler::plan_prefill(size_t n_decode, int budget) {
  // Prefill: each client's oldest prompt before anyone's second (fair between
  // clients); within a rank, prompts shorter than one step first (a short
  // request arriving during a long prefill gets its first token at once),
  // then oldest first. Long prompts still progress every step: a short
  // prompt only goes first, it never takes more than what is left.
  for (auto& s : running_) {
    if (s->done || s->pending() <= 1) continue;
    int rank = 0;
    for (size_t i = n_decode; i < plan_.size(); ++i)
      rank += plan_[i].first->req.client == s->req.client;
    plan_.push_back({s.get(), rank});
  }
  // A short prompt: at most one step's tokens to prefill in all, counting
  // what it has prefilled already (a long prompt's last chunk is not a short
  // request, and a short one that had to be chunked stays first in line
  // instead of waiting behind the long one for the rest).
  const auto is_short = [quick = opts_.step_tokens](const Sequence& s) {
    return s.pending() + s.prompt_computed <= quick;
  };
  std::sort(plan_.begin() + long(n_decode), plan_.end(), [&](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second < b.second;
    const bool qa = is_short(*a.first), qb = is_short(*b.first);
    if (qa != qb) return qa;
    return a.first->order < b.first->order;
  });
  // With streams decoding, the chunks' predicted cost keeps the step within
  // itl_slack decode-only steps (step_budget.h; StepRoom: short prompts go
  // whole within three steps' room, the others get what fits). Every
  // StepBudget::kProbeEvery-th such step is decode-only, to keep the decode
  // cost current; not while a short prompt waits.
  const bool paced = n_decode > 0 && opts_.itl_slack > 0 && costs_->ready();
  double room_ms = 0;
  bool probe = false;
  if (paced) {
    room_ms = costs_->room_ms(opts_.itl_slack);
    if (media_->pending()) room_ms /= 2;  // the other half goes to the image encodes
    probe = costs_->probe_due() && plan_.size() > n_decode && !is_short(*plan_[n_decode].first);
  }
  // Until the cost model has seen a mixed step, a step beside decodes takes
  // at most kLearnTokens of prompt: the step it learns from is not a long gap.
  if (n_decode > 0 && opts_.itl_slack > 0 && !paced) budget = std::min(budget, kLearnTokens);
  StepRoom room(*costs_, room_ms, kMinPrefillChunk);
  size_t kept = n_decode;
  for (size_t i = n_decode; i < plan_.size() && budget > 0 && !probe; ++i) {
    Sequence& s = *plan_[i].first;
    int n = paced ? room.size(budget, s.pending(), s.in_kv, s.last_chunk, is_short(s))
                  : std::min(budget, s.pending());
    if (!s.req.media.empty()) n = MediaFeed::fit_chunk(s, media_ready(s, n));
    if (n == 0) continue;  // waits before an image being encoded, or no room left
    if (paced) room.take(n, s.in_kv);
    s.last_chunk = n;
    plan_[kept++] = {&s, n};
    budget -= n;
  }
  plan_.resize(kept);
}

void Scheduler::run_step() {
  batch_.entries.clear();
  entry_seq_.clear();
  // Plan: decode first (one token for every sequence whose context is in),
  // then prefill chunks, oldest admission first, within the token budget.
  // Each planned sequence gets its KV room in admission order, which may
  // preempt newer ones (they drop out of the plan).
  // A sequence whose client has not drained its stream (kBacklogBytes of
  // text pending) is paused: it keeps its KV and resumes after the drain.
  plan_.clear();
  int budget = opts_.step_tokens;
  last_step_ms_ = 0;
  last_step_decodes_ = 0;
  for (auto& s : running_) {
    if (s->done || s->pending() != 1 || s->req.stream->backlogged()) continue;
    if (!s->req.media.empty() && media_ready(*s, 1) == 0) continue;
    plan_.push_back({s.get(), 1});
    budget -= 1;
  }
  plan_prefill(plan_.size(), budget);
  std::vector<std::pair<Sequence*, int>>& order = plan_order_;
  order.assign(plan_.begin(), plan_.end());
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first->order < b.first->order; });
  for (auto& [s, n] : order) {
    if (s->done || !s->has_kv()) continue;  // preempted for an older one
    reserve_for(*s, n);
  }
  runs_.clear();
  entry_runs_.clear();
  for (auto& [s, n] : plan_) {
    if (s->done || !s->has_kv()) continue;
    // Making room for one sequence may have found a block another one needs
    // unreadable on flash.
    if (const std::string& why = engine_.failure(s->seq); !why.empty()) {
      kv_failed(*s, why);
      continue;
    }
    const size_t first_run = runs_.size();
    if (!s->req.media.empty()) {
      try {  // media rows, fetched on first need from a source that cannot encode in slices
        media_->runs(*s, n, runs_);
      } catch (const std::exception& e) {
        runs_.resize(first_run);
        logger()->error("[{}] image: {}", s->req.id, e.what());
        finish(*s, FinishReason::Error, e.what());
        continue;
      }
    }
    entry_runs_.push_back({first_run, runs_.size()});
    const bool last = s->in_kv + n == int(s->tokens.size());
    batch_.entries.push_back({s->seq,
                              std::span<const int32_t>(s->tokens.data() + s->in_kv, size_t(n)),
                              last ? LogitsMode::Last : LogitsMode::None,
                              {},
                              s->req.lora});
    entry_seq_.push_back(s);
  }
  if (batch_.entries.empty()) {
    park_preempted();
    return;
  }
  for (size_t i = 0; i < batch_.entries.size(); ++i) {  // runs_ no longer grows
    const auto [b, e] = entry_runs_[i];
    batch_.entries[i].embeddings = std::span<const EmbeddingRun>(runs_.data() + b, e - b);
  }

  const auto t0 = Clock::now();
  try {
    engine_.step(batch_, out_);
  } catch (const std::exception& e) {
    logger()->error("forward pass over {} sequences failed: {}", batch_.entries.size(), e.what());
    for (Sequence* s : entry_seq_) finish(*s, FinishReason::Error, e.what());
    park_preempted();
    return;
  }
  const auto t1 = Clock::now();
  last_step_ms_ = seconds_between(t0, t1) * 1e3;
  if (logger()->should_log(spdlog::level::trace)) {
    std::string pre;
    int dec = 0, dec_ctx = 0;
    for (size_t i = 0; i < batch_.entries.size(); ++i) {
      const int n = int(batch_.entries[i].tokens.size());
      if (n == 1 && entry_seq_[i]->pending() == 1) {
        ++dec;
        dec_ctx += entry_seq_[i]->in_kv;
      } else {
        fmt::format_to(std::back_inserter(pre), " {}@{}", n, entry_seq_[i]->in_kv);
      }
    }
    const auto th = costs_->coefficients();
    logger()->trace(
        "step decode={} ctx={} prefill=[{}] ms={:.2f} gap={:.2f} model: decode={:.2f} "
        "a={:.3f} b={:.3f} c={:.3f}",
        dec, dec_ctx, pre, last_step_ms_, ms_between(prev_step_end_, t0), costs_->decode_ms(),
        th[0], th[1], th[2]);
  }
  prev_step_end_ = t1;
  metrics_.steps += 1;
  metrics_.step_tokens += uint64_t(batch_.total_tokens());
  metrics_.step_duration.observe(seconds_between(t0, t1));
  {
    // The costs that size the next steps' prefill share (step_budget.h).
    int decodes = 0;
    for (size_t i = 0; i < batch_.entries.size(); ++i) {
      const int n = int(batch_.entries[i].tokens.size());
      if (n == 1 && entry_seq_[i]->pending() == 1)
        ++decodes;
      else
        costs_->add_chunk(n, entry_seq_[i]->in_kv);
    }
    last_step_decodes_ = decodes;
    costs_->observe(decodes, last_step_ms_, runs_.empty());
  }

  for (size_t i = 0; i < batch_.entries.size(); ++i) {
    Sequence& s = *entry_seq_[i];
    const auto& e = batch_.entries[i];
    const int n = int(e.tokens.size());
    s.in_kv += n;
    if (!s.req.media.empty()) MediaFeed::release_passed(s);
    if (const std::string& why = engine_.failure(s.seq); !why.empty()) {
      kv_failed(s, why);  // its logits are not to be trusted
      continue;
    }
    if (s.n_generated == 0) {  // the prompt (or its recompute before the first token)
      s.prompt_computed += n;
      metrics_.prompt_tokens += uint64_t(n);
    }
    if (e.logits == LogitsMode::None) continue;
    if (s.req.params.max_tokens == 0) {
      finish(s, FinishReason::Length);
      continue;
    }
    emit_token(s, s.sampler.sample(out_.last(int(i))));
  }
  park_preempted();
}

void Scheduler::emit_token(Sequence& s, int32_t token) {
  s.sampler.accept(token, true);
  s.n_generated += 1;
  metrics_.generated_tokens += 1;
  const auto now = Clock::now();
  if (s.n_generated == 1) {
    s.first_token = now;
    metrics_.time_to_first_token.observe(seconds_between(s.req.arrival, now));
  } else {
    metrics_.inter_token_latency.observe(seconds_between(s.last_token, now));
  }
  s.last_token = now;

  const auto& tok = engine_.tokenizer();
  if (!s.req.params.ignore_eos && tok.is_eog(token)) {
    finish(s, FinishReason::Stop);
    return;
  }
  const auto r = s.stop.push(s.decoder.push(token));
  s.req.stream->push(r.emit, 1, s.sampler.last_logprobs());
  if (r.stopped) {
    finish(s, FinishReason::Stop);
  } else if (s.req.params.max_tokens > 0 && s.n_generated >= s.req.params.max_tokens) {
    finish(s, FinishReason::Length);
  } else if (int(s.tokens.size()) >= n_ctx_) {
    finish(s, FinishReason::Length);  // no room left to feed the token back
  } else {
    s.tokens.push_back(token);
  }
}

void Scheduler::finish(Sequence& s, FinishReason reason, std::string error, std::string detail) {
  if (s.done) return;
  s.done = true;
  auto& stream = *s.req.stream;
  const auto now = Clock::now();
  if (reason != FinishReason::Error && !s.stop.stopped()) {
    // Whatever the detokenizer and the stop matcher still hold is final text now.
    auto r = s.stop.push(s.decoder.flush());
    std::string tail = std::move(r.emit);
    if (!r.stopped) tail += s.stop.flush();
    stream.push(tail, 0);
  }
  Finish f;
  f.reason = reason;
  f.error = std::move(error);
  f.usage.prompt_tokens = s.prompt_len();
  f.usage.completion_tokens = s.n_generated;
  if (!s.started) s.admitted = now;
  f.usage.cached_tokens = s.reused_dram + s.reused_flash;
  f.timings.queue_ms = ms_between(s.req.arrival, s.admitted);
  f.timings.prompt_n = s.prompt_computed;
  f.timings.cache_n = s.reused_dram + s.reused_flash;
  f.timings.cache_dram_n = s.reused_dram;
  f.timings.cache_flash_n = s.reused_flash;
  f.timings.preemptions = s.preemptions;
  if (!s.req.session.empty()) f.timings.session_cache_n = f.timings.cache_n;
  f.timings.image_n = s.media.fetched;
  f.timings.image_cache_hits = s.media.cache_hits;
  f.timings.image_encode_ms = s.media.fetch_ms;
  f.timings.predicted_n = s.n_generated;
  f.timings.finish_detail = std::move(detail);
  if (reason == FinishReason::Stop && s.stop.matched() >= 0)
    f.stop_string = s.req.params.stop[size_t(s.stop.matched())];
  if (s.n_generated > 0) {
    f.timings.prompt_ms = ms_between(s.admitted, s.first_token);
    f.timings.ttft_ms = ms_between(s.req.arrival, s.first_token);
    f.timings.predicted_ms = ms_between(s.first_token, s.last_token);
  } else {
    f.timings.prompt_ms = ms_between(s.admitted, now);
  }
  switch (reason) {
    case FinishReason::Stop:
    case FinishReason::Length:
      metrics_.requests_finished += 1;
      break;
    case FinishReason::Cancelled:
      metrics_.requests_cancelled += 1;
      break;
    case FinishReason::Error:
      metrics_.requests_failed += 1;
      break;
  }
  logger()->info("[{}] finished: {} prompt={} (cached {}) completion={} ttft={:.1f}ms gen={:.1f}ms",
                 s.req.id, to_string(reason), f.usage.prompt_tokens, f.usage.cached_tokens,
                 f.usage.completion_tokens, f.timings.ttft_ms, f.timings.predicted_ms);
  stream.finish(std::move(f));
}

void Scheduler::retire_finished() {
  auto it =
      std::remove_if(running_.begin(), running_.end(), [&](const std::unique_ptr<Sequence>& s) {
        if (!s->done) return false;
        if (s->has_kv())
          engine_.free_sequence(s->seq, s->req.session.empty() ? 0.0 : opts_.session_ttl_s);
        return true;
      });
  running_.erase(it, running_.end());
}

int64_t Scheduler::kv_tokens_in_use() const {
  int64_t n = 0;
  for (const auto& s : running_) n += int64_t(s->tokens.size());
  return n;
}

void Scheduler::update_gauges() {
  int64_t kv = 0;
  for (const auto& s : running_) kv += s->in_kv;
  metrics_.running = int64_t(running_.size());
  metrics_.preempted = int64_t(preempted_.size());
  metrics_.kv_sequences_used = int64_t(running_.size());
  metrics_.kv_tokens_used = kv;
  metrics_.set_kv(engine_.cache_stats());
}

}  // namespace tern::sched
