#pragma once
// The pacing the resumable encoders (EncodeJob, AudioEncodeJob) share: run
// stages until done or until the next stage's predicted cost (its GFLOP
// times a measured ms/GFLOP, an EWMA) would pass the budget; at least one
// stage a call.
#include <chrono>

namespace tern {
class TaskPool;
}

namespace tern::vision::detail {

struct JobPacing {
  int slices = 0;  // advance() calls that ran a stage
  double busy_ms = 0;
  double ms_per_gflop = 0;
};

// S: bool done() const; bool preprocessing() const; void preprocess(TaskPool&);
//    double next_gflop() const; void run_next(TaskPool&) (one stage).
template <class S>
void advance_stages(S& st, JobPacing& p, TaskPool& pool, double budget_ms) {
  using Clock = std::chrono::steady_clock;
  const auto ms_since = [](Clock::time_point a) {
    return std::chrono::duration<double, std::milli>(Clock::now() - a).count();
  };
  const auto t0 = Clock::now();
  int ran = 0;
  while (!st.done()) {
    if (st.preprocessing()) {  // first: the input's preprocessing
      st.preprocess(pool);
      ++ran;
      continue;
    }
    const double g = st.next_gflop();
    if (ran > 0 && ms_since(t0) + g * p.ms_per_gflop > budget_ms) break;
    const auto t1 = Clock::now();
    st.run_next(pool);
    const double ms = ms_since(t1);
    if (g > 0) {
      const double rate = ms / g;
      p.ms_per_gflop = p.ms_per_gflop > 0 ? p.ms_per_gflop + 0.3 * (rate - p.ms_per_gflop) : rate;
    }
    ++ran;
  }
  if (ran > 0) {
    p.slices += 1;
    p.busy_ms += ms_since(t0);
  }
}

}  // namespace tern::vision::detail
