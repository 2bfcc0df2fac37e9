#pragma once
// Wakes a session coroutine when one of its streams has something new.
//
// The session waits on a timer that never expires; sched::Stream's notify
// (called on the engine thread) posts a cancel of that timer to the session's
// executor. Because the session always drains its streams before it waits,
// and the post runs on the same executor, no wake-up can be lost.
#include <memory>

#include "net.h"
#include "tern/sched/stream.h"

namespace tern::server {

class Waker : public std::enable_shared_from_this<Waker> {
 public:
  explicit Waker(net::any_io_executor ex) : timer_(ex, net::steady_timer::time_point::max()) {}

  // A thread-safe notify function for sched::Stream. Safe after the Waker is gone.
  sched::Stream::Notify notifier() {
    return [w = weak_from_this(), ex = timer_.get_executor()] {
      net::post(ex, [w] {
        if (auto self = w.lock()) self->timer_.cancel();
      });
    };
  }

  // On the session's executor: wake the waiter now (if any).
  void wake() { timer_.cancel(); }

  // Suspends until wake() or a notify. Returns false if the coroutine itself
  // was cancelled (its cancellation state is set) rather than woken.
  awaitable<bool> wait() {
    co_await timer_.async_wait(use_nothrow);
    auto cs = co_await net::this_coro::cancellation_state;
    co_return cs.cancelled() == net::cancellation_type::none;
  }

 private:
  net::steady_timer timer_;
};

}  // namespace tern::server
