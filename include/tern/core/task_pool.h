#pragma once
// A persistent pool of worker threads for data-parallel kernels.
//
// run(n_tasks, fn) calls fn(task, worker) for every task in [0, n_tasks) and
// returns when all have finished. The calling thread is worker 0 and takes
// part. Tasks are claimed one at a time from a shared atomic counter, so a
// worker that finishes early simply takes the next task: split work into
// more tasks than workers (e.g. tile-sized chunks of output channels) and
// the load balances itself. Idle workers spin for about 200 microseconds
// (long enough to catch the next kernel of the same forward pass), then
// sleep on a condition variable; they never spin forever.
//
// The join waits for the tasks, not for the workers: a worker the OS has not
// scheduled yet (a busy machine) simply finds no task left when it wakes,
// instead of holding up the caller. The claim counter carries the job's
// generation in its high 32 bits, so a late worker can never claim a task of
// a newer job by mistake.
//
// run() takes the callable by reference (no std::function, no allocation), so
// dispatching a kernel costs a few cache-line transfers (`tern bench` reports
// one dispatch-and-join as dispatch_us).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace tern {

class TaskPool {
 public:
  // A non-owning reference to a callable void(int64_t task, int worker).
  class FnRef {
   public:
    template <typename F>
    requires(!std::is_same_v<std::remove_cv_t<F>, FnRef>)
        FnRef(F& f)  // NOLINT: implicit on purpose
        : obj_(const_cast<void*>(static_cast<const void*>(&f))),
          call_([](void* o, int64_t t, int w) { (*static_cast<F*>(o))(t, w); }) {}
    void operator()(int64_t t, int w) const { call_(obj_, t, w); }

   private:
    void* obj_;
    void (*call_)(void*, int64_t, int);
  };

  explicit TaskPool(int n_threads = 0);  // 0: one per core
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  int size() const { return n_threads_; }

  // Not reentrant: call from one thread at a time (the engine thread).
  template <typename F>
  void run(int64_t n_tasks, F&& fn) {
    run_ref(n_tasks, FnRef(fn));
  }
  void run_ref(int64_t n_tasks, FnRef fn);

  // Convenience: split [0, n) into chunks of `grain` and call fn(begin, end, worker).
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t tasks = (n + grain - 1) / grain;
    run(tasks, [&](int64_t t, int w) { fn(t * grain, std::min(n, (t + 1) * grain), w); });
  }

 private:
  struct Job {
    std::atomic<int64_t> n{0};
    std::atomic<FnRef*> fn{nullptr};
  };
  void worker_loop(int worker);
  void work_on(uint32_t generation, int worker);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint32_t generation_ = 0;  // the caller's count of jobs
  Job jobs_[2];              // job g lives in jobs_[g & 1]
  // Each on its own cache line: the claim word is hammered, done_ less so.
  alignas(64) std::atomic<uint64_t> claim_{0};  // (generation << 32) | next task
  alignas(64) std::atomic<int64_t> done_{0};    // tasks of the current job finished
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tern
