#pragma once
// A blocking client of the scheduler for callers that run one request at a
// time on their own thread (the CLI's `tern run` and `tern chat`): a single
// sequence is a batch of one, on the same path as the server's requests.
//
//   sched::SyncClient client(scheduler);      // scheduler already started
//   Finish f = client.run(std::move(request), [](std::string_view piece) {
//     print(piece);
//     return true;                            // false: cancel the request
//   });
//
// run() submits the request with a Stream whose notify wakes the calling
// thread (a condition variable, nothing polls), hands each drained piece of
// text to on_text, and returns the Finish. cancel() may be called from any
// other thread (a signal-handling thread on Ctrl-C) and cancels the request
// in flight through Scheduler::cancel.
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>

#include "tern/sched/request.h"
#include "tern/sched/stream.h"

namespace tern::sched {

class Scheduler;

class SyncClient {
 public:
  using OnText = std::function<bool(std::string_view)>;

  explicit SyncClient(Scheduler& scheduler) : scheduler_(scheduler) {}
  SyncClient(const SyncClient&) = delete;
  SyncClient& operator=(const SyncClient&) = delete;

  // Runs `r` (its stream is replaced) to completion. A refused submit (a
  // prompt the scheduler will not run, queue full, shutting down) returns
  // Finish{Error} with the reason. One run at a time.
  Finish run(Request r, const OnText& on_text);

  // Thread-safe: cancels the request in flight, if any; returns whether there was one.
  bool cancel();

 private:
  Scheduler& scheduler_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  std::shared_ptr<Stream> current_;  // the request in flight
};

}  // namespace tern::sched
