#include "tern/core/task_pool.h"

#include <cassert>
#include <chrono>

#include "tern/core/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TERN_PAUSE() _mm_pause()
#elif defined(__aarch64__)
// The spin-wait hint (like x86's pause: frees the core's issue slots for a sibling thread).
#define TERN_PAUSE() __asm__ __volatile__("yield" ::: "memory")
#else
#define TERN_PAUSE() ((void)0)
#endif

namespace tern {

namespace {
// How long an idle worker polls before it sleeps: long enough to catch the
// next kernel of the same forward pass (a few microseconds apart), short
// enough that an idle server burns no CPU. Past the first kPausePolls polls
// it yields the core between polls: the engine thread's serial work between
// steps (sampling, detokenizing) or the reactor thread writing the tokens,
// or another process, may be waiting for that core.
constexpr auto kSpinTime = std::chrono::microseconds(200);
constexpr int kPausePolls = 2048;
// The caller polls for its last tasks this many times before it starts
// yielding the core (a descheduled worker may be holding one of them).
constexpr int kJoinSpins = 4000;

uint32_t generation_of(uint64_t claim) {
  return uint32_t(claim >> 32);
}
}  // namespace

TaskPool::TaskPool(int n_threads) {
  n_threads_ = n_threads > 0 ? n_threads : cpu_features().logical_cores;
  for (int w = 1; w < n_threads_; ++w) threads_.emplace_back([this, w] { worker_loop(w); });
}

TaskPool::~TaskPool() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true);
    claim_.store(uint64_t(generation_ + 1) << 32);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

// Claims and runs tasks of job `generation` until none is left (or a newer
// job has started, which means this one is done).
void TaskPool::work_on(uint32_t generation, int worker) {
  const Job& job = jobs_[generation & 1];
  for (;;) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    if (generation_of(c) != generation) return;
    // Read before the claim: if the claim below succeeds, the job was still
    // current, so these are its values (a newer job's are written only after
    // every task of this one, including the one being claimed, has finished).
    const int64_t n = job.n.load(std::memory_order_relaxed);
    FnRef* fn = job.fn.load(std::memory_order_relaxed);
    const int64_t task = int64_t(uint32_t(c));
    if (task >= n) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    (*fn)(task, worker);
    done_.fetch_add(1, std::memory_order_release);
  }
}

void TaskPool::run_ref(int64_t n_tasks, FnRef fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  assert(n_tasks < (int64_t(1) << 31));
  const uint32_t g = ++generation_;
  jobs_[g & 1].n.store(n_tasks, std::memory_order_relaxed);
  jobs_[g & 1].fn.store(&fn, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(uint64_t(g) << 32);  // seq_cst: publishes the job, ordered before reading sleepers_
  if (sleepers_.load() > 0) {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }
  work_on(g, 0);
  for (int spins = 0; done_.load(std::memory_order_acquire) != n_tasks; ++spins) {
    if (spins < kJoinSpins) {
      TERN_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
}

void TaskPool::worker_loop(int worker) {
  uint32_t seen = 0;
  for (;;) {
    // Poll for a while, then sleep until a new job is published.
    uint32_t g = generation_of(claim_.load(std::memory_order_acquire));
    if (g == seen) {
      const auto until = std::chrono::steady_clock::now() + kSpinTime;
      for (int i = 1; (g = generation_of(claim_.load(std::memory_order_acquire))) == seen; ++i) {
        if (i < kPausePolls) {
          TERN_PAUSE();
        } else {
          std::this_thread::yield();
        }
        if (i % 64 == 0 && std::chrono::steady_clock::now() > until) break;
      }
    }
    if (g == seen) {
      std::unique_lock lock(mu_);
      sleepers_.fetch_add(1);  // seq_cst: ordered before the generation check below
      cv_.wait(lock, [&] { return generation_of(claim_.load()) != seen; });
      sleepers_.fetch_sub(1);
      g = generation_of(claim_.load(std::memory_order_acquire));
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    work_on(g, worker);
  }
}

}  // namespace tern
