#include "tern/core/task_pool.h"

#include <chrono>

#include "tern/core/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TERN_PAUSE() _mm_pause()
#else
#define TERN_PAUSE() ((void)0)
#endif

namespace tern {

namespace {
// About 50 microseconds of polling before a worker goes to sleep: long enough
// to catch the next kernel of the same forward pass, short enough that an idle
// server burns no CPU.
constexpr int kSpinIters = 20000;
}  // namespace

TaskPool::TaskPool(int n_threads) {
  n_threads_ = n_threads > 0 ? n_threads : cpu_features().logical_cores;
  for (int w = 1; w < n_threads_; ++w) threads_.emplace_back([this, w] { worker_loop(w); });
}

TaskPool::~TaskPool() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void TaskPool::work_on_current(int worker) {
  const Fn& fn = *fn_;
  const int64_t n = n_tasks_;
  for (;;) {
    const int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= n) break;
    fn(t, worker);
  }
}

void TaskPool::run(int64_t n_tasks, const Fn& fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard lock(mu_);
    fn_ = &fn;
    n_tasks_ = n_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    active_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  work_on_current(0);
  // Wait for the other workers to finish their last task.
  while (active_.load(std::memory_order_acquire) != 0) TERN_PAUSE();
}

void TaskPool::worker_loop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a little, then sleep until the generation changes.
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIters) {
      TERN_PAUSE();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    work_on_current(worker);
    active_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace tern
