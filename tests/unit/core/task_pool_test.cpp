#include "tern/core/task_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace tern {

TEST(TaskPool, RunsEveryTaskExactlyOnce) {
  TaskPool pool(3);
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + round % 37;
    std::vector<std::atomic<int>> hits(n);
    pool.run(n, [&](int64_t t, int w) {
      ASSERT_GE(w, 0);
      ASSERT_LT(w, 3);
      hits[t].fetch_add(1);
    });
    for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "round " << round;
  }
}

TEST(TaskPool, ParallelForCoversRange) {
  TaskPool pool(2);
  std::vector<int> v(1001, 0);
  pool.parallel_for(1001, 64, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) v[i] += 1;
  });
  for (int x : v) ASSERT_EQ(x, 1);
}

TEST(TaskPool, SingleThreadPoolWorks) {
  TaskPool pool(1);
  int sum = 0;
  pool.run(10, [&](int64_t t, int w) {
    EXPECT_EQ(w, 0);
    sum += int(t);
  });
  EXPECT_EQ(sum, 45);
}

TEST(TaskPool, ManyTinyJobsBackToBack) {
  // Exercises the hand-over between jobs: late workers of job N must never
  // run (or count) a task of job N+1.
  TaskPool pool(4);
  std::vector<std::atomic<int>> hits(64);
  int64_t expected = 0;
  for (int round = 0; round < 20000; ++round) {
    const int n = 2 + round % 7;
    pool.run(n, [&](int64_t t, int) { hits[size_t(t)].fetch_add(1, std::memory_order_relaxed); });
    expected += n;
  }
  int64_t total = 0;
  for (auto& h : hits) total += h.load();
  EXPECT_EQ(total, expected);
}

TEST(TaskPool, WorkersWakeAfterSleeping) {
  TaskPool pool(2);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the worker goes to sleep
    // A sleeping worker must be woken by the next job. On a busy machine it may
    // not get a core at once, so allow many jobs (seconds) before calling it lost.
    bool other_worker = false;
    for (int job = 0; job < 2000 && !other_worker; ++job) {
      std::atomic<int> sum{0};
      std::atomic<bool> seen{false};
      pool.run(64, [&](int64_t t, int w) {
        sum += int(t);
        if (w != 0) seen = true;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      });
      ASSERT_EQ(sum.load(), 64 * 63 / 2);
      other_worker = seen.load();
    }
    EXPECT_TRUE(other_worker) << "the sleeping worker never joined";
  }
}

TEST(TaskPool, MutableAndConstCallables) {
  TaskPool pool(2);
  int calls = 0;
  std::mutex mu;
  auto counting = [&, local = 0](int64_t, int) mutable {
    ++local;
    std::lock_guard lock(mu);
    ++calls;
  };
  pool.run(10, counting);
  const auto same = [&](int64_t, int) {
    std::lock_guard lock(mu);
    ++calls;
  };
  pool.run(10, same);
  EXPECT_EQ(calls, 20);
}

}  // namespace tern
