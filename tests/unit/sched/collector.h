#pragma once
// Test helper for the scheduler tests: collects one stream's text.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "tern/sched/stream.h"

namespace tern::sched::testutil {

// Collects one stream's output; wait() blocks until its Finish arrives.
class Collector {
 public:
  Collector() : stream_(std::make_shared<Stream>([this] { wake(); })) {}

  const std::shared_ptr<Stream>& stream() const { return stream_; }

  // Drains until the finish (or the timeout) and returns it.
  Finish wait(std::chrono::seconds timeout = std::chrono::seconds(300)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto c = stream_->drain();
      text_ += c.text;
      tokens_ += c.n_tokens;
      if (c.finish) return *c.finish;
      if (!c.empty()) continue;
      std::unique_lock lock(mu_);
      if (!cv_.wait_until(lock, deadline, [&] { return woken_; })) {
        ADD_FAILURE() << "no finish within the timeout";
        return Finish::with(FinishReason::Error, "timeout");
      }
      woken_ = false;
    }
  }

  const std::string& text() const { return text_; }
  int tokens() const { return tokens_; }

 private:
  void wake() {
    std::lock_guard lock(mu_);
    woken_ = true;
    cv_.notify_one();
  }

  std::shared_ptr<Stream> stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  std::string text_;
  int tokens_ = 0;
};

}  // namespace tern::sched::testutil
