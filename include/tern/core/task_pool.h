#pragma once
// A persistent pool of worker threads for data-parallel kernels.
//
// run(n_tasks, fn) calls fn(task, worker) for every task in [0, n_tasks) and
// returns when all have finished. The calling thread is worker 0 and takes
// part. Tasks are claimed one at a time from a shared atomic counter, so a
// worker that finishes early simply takes the next task: split work into
// more tasks than workers (e.g. tile-sized chunks of output channels) and
// the load balances itself. Idle workers spin briefly, then sleep on a
// condition variable; they never spin forever.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tern {

class TaskPool {
 public:
  using Fn = std::function<void(int64_t task, int worker)>;

  explicit TaskPool(int n_threads = 0);  // 0: one per core
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  int size() const { return n_threads_; }

  // Not reentrant: call from one thread at a time (the engine thread).
  void run(int64_t n_tasks, const Fn& fn);

  // Convenience: split [0, n) into chunks of `grain` and call fn(begin, end, worker).
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t tasks = (n + grain - 1) / grain;
    run(tasks, [&](int64_t t, int w) { fn(t * grain, std::min(n, (t + 1) * grain), w); });
  }

 private:
  void worker_loop(int worker);
  void work_on_current(int worker);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> active_{0};
  int64_t n_tasks_ = 0;
  const Fn* fn_ = nullptr;
  std::atomic<bool> stop_{false};
};

}  // namespace tern
