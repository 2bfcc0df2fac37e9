#include "tern/sched/stream.h"

namespace tern::sched {

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
  }
  return "stop";
}

void Stream::signal(std::unique_lock<std::mutex>& lock) {
  const bool first = !signalled_;
  signalled_ = true;
  lock.unlock();
  if (first && notify_) notify_();
}

void Stream::push(std::string_view text, int n_tokens, const TokenLogprob* lp) {
  std::unique_lock lock(mu_);
  if (finished_ || (text.empty() && n_tokens == 0)) return;
  text_.append(text);
  if (lp) logprobs_.push_back(*lp);
  n_tokens_ += n_tokens;
  if (text_.size() >= backlog_bytes_) backlogged_.store(true, std::memory_order_release);
  signal(lock);
}

void Stream::finish(Finish f) {
  std::unique_lock lock(mu_);
  if (finished_) return;
  finished_ = true;
  finish_ = std::move(f);
  signal(lock);
}

StreamChunk Stream::drain() {
  StreamChunk c;
  bool was_backlogged = false;
  {
    std::lock_guard lock(mu_);
    c.text.swap(text_);
    c.n_tokens = n_tokens_;
    n_tokens_ = 0;
    c.logprobs.swap(logprobs_);
    c.finish = std::move(finish_);
    finish_.reset();
    signalled_ = false;
    was_backlogged = backlogged_.exchange(false, std::memory_order_acq_rel);
  }
  if (was_backlogged && drain_hook_) drain_hook_();
  return c;
}

bool Stream::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

}  // namespace tern::sched
