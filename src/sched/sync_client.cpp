#include "tern/sched/sync_client.h"

#include "tern/core/error.h"
#include "tern/sched/scheduler.h"

namespace tern::sched {

Finish SyncClient::run(Request r, const OnText& on_text) {
  auto stream = std::make_shared<Stream>([this] {
    {
      std::lock_guard lock(mu_);
      woken_ = true;
    }
    cv_.notify_one();
  });
  r.stream = stream;
  {
    std::lock_guard lock(mu_);
    woken_ = false;
    current_ = stream;
  }
  // Forget the stream on every way out, so a late cancel() finds nothing.
  struct Clear {
    SyncClient& c;
    ~Clear() {
      std::lock_guard lock(c.mu_);
      c.current_.reset();
    }
  } clear{*this};

  SubmitStatus st;
  try {
    st = scheduler_.submit(std::move(r));
  } catch (const InvalidArgument& e) {  // the prompt is refused (too long for the context, ...)
    Finish f;
    f.reason = FinishReason::Error;
    f.error = e.what();
    return f;
  }
  if (st != SubmitStatus::Accepted) {
    Finish f;
    f.reason = FinishReason::Error;
    f.error =
        st == SubmitStatus::QueueFull ? "the queue is full" : "the scheduler is shutting down";
    return f;
  }
  bool cancelled = false;
  for (;;) {
    StreamChunk c = stream->drain();  // drain before sleeping: no lost wake-up
    if (!c.text.empty() && !cancelled && on_text && !on_text(c.text)) {
      cancelled = true;
      scheduler_.cancel(stream);
    }
    if (c.finish) return std::move(*c.finish);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return woken_; });
    woken_ = false;
  }
}

bool SyncClient::cancel() {
  std::shared_ptr<Stream> s;
  {
    std::lock_guard lock(mu_);
    s = current_;
  }
  if (!s) return false;
  scheduler_.cancel(s);
  return true;
}

}  // namespace tern::sched
