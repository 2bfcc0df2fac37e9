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
// How long an idle worker polls before it sleeps: long enough to catch the
// next kernel of the same forward pass (a few microseconds apart), short
// enough that an idle server burns no CPU.
constexpr auto kSpinTime = std::chrono::microseconds(200);
}  // namespace

TaskPool::TaskPool(int n_threads) {
  n_threads_ = n_threads > 0 ? n_threads : cpu_features().logical_cores;
  for (int w = 1; w < n_threads_; ++w) threads_.emplace_back([this, w] { worker_loop(w); });
}

TaskPool::~TaskPool() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void TaskPool::work_on_current(int worker) {
  const FnRef fn = *fn_;
  const int64_t n = n_tasks_;
  for (;;) {
    const int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= n) break;
    fn(t, worker);
  }
}

void TaskPool::run_ref(int64_t n_tasks, FnRef fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  fn_ = &fn;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  active_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: publishes the job, ordered before reading sleepers_
  if (sleepers_.load() > 0) {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }
  work_on_current(0);
  // Every worker checks in once per job, so the job's state can be reused next run.
  while (active_.load(std::memory_order_acquire) != 0) TERN_PAUSE();
}

void TaskPool::worker_loop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    // Poll for a while, then sleep until the generation changes.
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto until = std::chrono::steady_clock::now() + kSpinTime;
      for (int i = 1; (g = generation_.load(std::memory_order_acquire)) == seen; ++i) {
        TERN_PAUSE();
        if (i % 64 == 0 && std::chrono::steady_clock::now() > until) break;
      }
    }
    if (g == seen) {
      std::unique_lock lock(mu_);
      sleepers_.fetch_add(1);  // seq_cst: ordered before the generation check below
      cv_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    work_on_current(worker);
    active_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace tern
