#include "tern/sched/stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tern::sched {
namespace {

TEST(Stream, CoalescesPiecesAndNotifiesOncePerDrain) {
  int notified = 0;
  Stream s([&] { ++notified; });
  s.push("Hel", 1);
  s.push("lo", 1);
  s.push("", 0);  // nothing: no event
  s.push(" world", 2);
  EXPECT_EQ(notified, 1) << "one wake-up until the consumer drains";
  auto c = s.drain();
  EXPECT_EQ(c.text, "Hello world");
  EXPECT_EQ(c.n_tokens, 4);
  EXPECT_FALSE(c.finish);
  EXPECT_TRUE(s.drain().empty());
  s.push("!", 1);
  EXPECT_EQ(notified, 2);
  Finish f;
  f.reason = FinishReason::Length;
  f.usage.completion_tokens = 5;
  s.finish(f);
  EXPECT_EQ(notified, 2) << "still undrained: no second wake-up";
  c = s.drain();
  EXPECT_EQ(c.text, "!");
  ASSERT_TRUE(c.finish);
  EXPECT_EQ(c.finish->reason, FinishReason::Length);
  EXPECT_EQ(c.finish->usage.completion_tokens, 5);
  EXPECT_TRUE(s.finished());
}

TEST(Stream, NothingAfterFinish) {
  int notified = 0;
  Stream s([&] { ++notified; });
  s.finish(Finish::with(FinishReason::Stop));
  s.drain();
  s.push("late", 1);
  s.finish(Finish::with(FinishReason::Length));
  EXPECT_TRUE(s.drain().empty());
  EXPECT_EQ(notified, 1);
}

TEST(Stream, CancelFlag) {
  Stream s(nullptr);
  EXPECT_FALSE(s.cancelled());
  s.mark_cancelled();
  EXPECT_TRUE(s.cancelled());
}

// A producer thread and a consumer that sleeps only after an empty drain:
// every byte arrives and the consumer always sees the finish (no lost wake-up).
TEST(Stream, NoLostWakeUpsUnderContention) {
  for (int round = 0; round < 50; ++round) {
    std::mutex mu;
    std::condition_variable cv;
    bool woken = false;
    auto s = std::make_shared<Stream>([&] {
      std::lock_guard lock(mu);
      woken = true;
      cv.notify_one();
    });
    constexpr int kPieces = 2000;
    std::thread producer([&] {
      for (int i = 0; i < kPieces; ++i) s->push("x", 1);
      s->finish(Finish::with(FinishReason::Stop));
    });
    size_t bytes = 0;
    int tokens = 0;
    bool done = false;
    while (!done) {
      auto c = s->drain();
      bytes += c.text.size();
      tokens += c.n_tokens;
      done = c.finish.has_value();
      if (done || !c.empty()) continue;
      std::unique_lock lock(mu);
      ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return woken; }))
          << "lost wake-up";
      woken = false;
    }
    producer.join();
    EXPECT_EQ(bytes, size_t(kPieces));
    EXPECT_EQ(tokens, kPieces);
  }
}

}  // namespace
}  // namespace tern::sched
