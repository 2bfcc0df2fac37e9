// The token-boundary step: build one batch, run one forward pass, sample,
// stream text, retire. Runs on the engine thread only.
#include <algorithm>
#include <chrono>

#include "sequence.h"
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

void Scheduler::run_step() {
  batch_.entries.clear();
  entry_seq_.clear();
  int budget = opts_.step_tokens;
  // Decode first: one token for every sequence whose prompt is in.
  for (auto& s : running_) {
    if (s->done || s->prefilling()) continue;
    batch_.entries.push_back(
        {s->seq, std::span<const int32_t>(&s->next_token, 1), LogitsMode::Last});
    entry_seq_.push_back(s.get());
    budget -= 1;
  }
  // Then prefill chunks, oldest admission first, within what is left of the budget.
  for (auto& s : running_) {
    if (budget <= 0) break;
    if (s->done || !s->prefilling()) continue;
    const int n = std::min(budget, s->prompt_len() - s->prefilled);
    const bool last = s->prefilled + n == s->prompt_len();
    batch_.entries.push_back(
        {s->seq, std::span<const int32_t>(s->req.prompt.data() + s->prefilled, size_t(n)),
         last ? LogitsMode::Last : LogitsMode::None});
    entry_seq_.push_back(s.get());
    budget -= n;
  }
  if (batch_.entries.empty()) return;

  const auto t0 = Clock::now();
  try {
    engine_.step(batch_, out_);
  } catch (const std::exception& e) {
    logger()->error("forward pass over {} sequences failed: {}", batch_.entries.size(), e.what());
    for (Sequence* s : entry_seq_) finish(*s, FinishReason::Error, e.what());
    return;
  }
  const auto t1 = Clock::now();
  metrics_.steps += 1;
  metrics_.step_tokens += uint64_t(batch_.total_tokens());
  metrics_.step_duration.observe(seconds_between(t0, t1));

  for (size_t i = 0; i < batch_.entries.size(); ++i) {
    Sequence& s = *entry_seq_[i];
    const auto& e = batch_.entries[i];
    if (s.prefilling()) {
      s.prefilled += int(e.tokens.size());
      metrics_.prompt_tokens += e.tokens.size();
    }
    if (e.logits == LogitsMode::None) continue;
    if (s.req.params.max_tokens == 0) {
      finish(s, FinishReason::Length);
      continue;
    }
    emit_token(s, s.sampler.sample(out_.last(int(i))));
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
  s.req.stream->push(r.emit, 1);
  if (r.stopped) {
    finish(s, FinishReason::Stop);
  } else if (s.req.params.max_tokens > 0 && s.n_generated >= s.req.params.max_tokens) {
    finish(s, FinishReason::Length);
  } else if (engine_.seq_len(s.seq) >= n_ctx_) {
    finish(s, FinishReason::Length);  // no room left to feed the token back
  } else {
    s.next_token = token;
  }
}

void Scheduler::finish(Sequence& s, FinishReason reason, std::string error) {
  if (s.done) return;
  s.done = true;
  auto& stream = *s.req.stream;
  if (reason != FinishReason::Error && !s.stop.stopped()) {
    // Whatever the detokenizer and the stop matcher still hold is final text now.
    auto r = s.stop.push(s.decoder.flush());
    std::string tail = std::move(r.emit);
    if (!r.stopped) tail += s.stop.flush();
    stream.push(tail, 0);
  }
  const auto now = Clock::now();
  Finish f;
  f.reason = reason;
  f.error = std::move(error);
  f.usage.prompt_tokens = s.prompt_len();
  f.usage.completion_tokens = s.n_generated;
  f.timings.queue_ms = ms_between(s.req.arrival, s.admitted);
  f.timings.prompt_n = s.prefilled;
  f.timings.predicted_n = s.n_generated;
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
  logger()->info("[{}] finished: {} prompt={} completion={} ttft={:.1f}ms gen={:.1f}ms", s.req.id,
                 to_string(reason), f.usage.prompt_tokens, f.usage.completion_tokens,
                 f.timings.ttft_ms, f.timings.predicted_ms);
  stream.finish(std::move(f));
}

void Scheduler::retire_finished() {
  auto it =
      std::remove_if(running_.begin(), running_.end(), [&](const std::unique_ptr<Sequence>& s) {
        if (!s->done) return false;
        engine_.free_sequence(s->seq);
        return true;
      });
  running_.erase(it, running_.end());
}

int64_t Scheduler::kv_tokens_in_use() const {
  int64_t n = 0;
  for (const auto& s : running_) n += engine_.seq_len(s->seq) + (s->prompt_len() - s->prefilled);
  return n;
}

void Scheduler::update_gauges() {
  int64_t kv = 0;
  for (const auto& s : running_) kv += engine_.seq_len(s->seq);
  metrics_.running = int64_t(running_.size());
  metrics_.kv_sequences_used = int64_t(running_.size());
  metrics_.kv_tokens_used = kv;
}

}  // namespace tern::sched
