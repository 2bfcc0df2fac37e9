#include "tern/core/task_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace tern
