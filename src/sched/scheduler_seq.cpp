// A sequence's life on the engine thread: it starts (its KV sequence and
// cached prefix), gets KV room step by step (preempting newer ones when the
// pool is full), emits its tokens as text, finishes and retires.
#include <algorithm>
#include <chrono>

#include "sched_log.h"
#include "sequence.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::sched {
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
  // An embedding computes every position (its pooling reads their hidden
  // states), so it reuses no cached prefix, and its KV is never published;
  // but a causal reranker reads only its last row (Sequence::reuses_prefix).
  keys.publish = s.reuses_prefix();
  s.seq = engine_.new_sequence(keys);
  const kv::KvStats before = engine_.cache_stats();
  s.in_kv = s.reuses_prefix() ? engine_.attach_prefix(s.seq, s.tokens) : 0;
  if (s.embeds()) s.pooler->reset();
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
      if (s->req.pooling != Pooling::None)
        s->pooler.emplace(s->req.pooling, engine_.config().d_model, engine_.rank_head());
      attach(*s);
      logger()->debug(
          "[{}] admitted: seq={} prompt={} tokens ({} from the prefix cache), waited {:.1f} ms", id,
          s->seq, s->prompt_len(), s->in_kv, ms_between(s->req.arrival, s->admitted));
      running_.push_back(std::move(s));
    } catch (const std::exception& e) {
      if (s && s->seq >= 0) engine_.free_sequence(s->seq);
      logger()->error("[{}] could not start: {}", id, e.what());
      metrics_.requests_failed += 1;
      stream->finish(Finish::with(FinishReason::Error, e.what()));
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
  f.usage.accepted_prediction_tokens = s.prediction_accepted;
  f.usage.rejected_prediction_tokens = s.prediction_rejected;
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
  f.timings.audio_n = s.media.audio.fetched;
  f.timings.audio_cache_hits = s.media.audio.cache_hits;
  f.timings.audio_encode_ms = s.media.audio.fetch_ms;
  f.timings.predicted_n = s.n_generated;
  f.timings.draft_n = s.draft_n;
  f.timings.draft_accepted_n = s.draft_accepted;
  f.timings.prediction_accepted_n = s.prediction_accepted;
  f.timings.prediction_rejected_n = s.prediction_rejected;
  f.timings.finish_detail = std::move(detail);
  f.embedding = std::move(s.embedding);
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

// An embedding's prompt is all in: its pooled vector goes out with the Finish.
void Scheduler::finish_embedding(Sequence& s) {
  s.embedding = engine_.project_pooled(s.pooler->result());
  finish(s, FinishReason::Stop);
}

void Scheduler::retire_finished() {
  auto it =
      std::remove_if(running_.begin(), running_.end(), [&](const std::unique_ptr<Sequence>& s) {
        if (!s->done || s->in_pass) return false;
        const bool pin = !s->req.session.empty() && !s->embeds();
        if (s->has_kv()) engine_.free_sequence(s->seq, pin ? opts_.session_ttl_s : 0.0);
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
