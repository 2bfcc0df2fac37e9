#pragma once
// Counters, gauges and histograms the scheduler updates and the server exports
// (as Prometheus text, see server/metrics_text.h). Updates are lock-free
// atomics except histogram observations, which take a short lock. Nothing here
// knows about HTTP.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tern/core/memory_budget.h"
#include "tern/kv/kv_types.h"

namespace tern::sched {

// A cumulative histogram with fixed upper bounds (Prometheus style).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);

  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;  // ascending; +Inf is implicit
    std::vector<uint64_t> cumulative;  // count of values <= bound, one per bound
    uint64_t count = 0;                // all values (the +Inf bucket)
    double sum = 0;
  };
  Snapshot snapshot() const;

  // Latency buckets in seconds, 1 ms .. 30 s.
  static std::vector<double> latency_buckets();

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct Metrics {
  // Requests by outcome.
  std::atomic<uint64_t> requests_submitted{0};
  std::atomic<uint64_t> requests_rejected{0};   // queue full or shutting down
  std::atomic<uint64_t> requests_finished{0};   // stop or length
  std::atomic<uint64_t> requests_cancelled{0};  // before or while running
  std::atomic<uint64_t> requests_failed{0};     // engine errors

  std::atomic<uint64_t> prompt_tokens{0};     // prompt tokens prefilled
  std::atomic<uint64_t> generated_tokens{0};  // tokens sampled
  // Speculative decoding: tokens guessed and checked, and how many were kept.
  std::atomic<uint64_t> draft_tokens{0};
  std::atomic<uint64_t> draft_accepted_tokens{0};
  std::atomic<uint64_t> steps{0};        // forward passes run
  std::atomic<uint64_t> step_tokens{0};  // tokens over all forward passes
  // Steps paused between layers for newly arrived short prompts (the
  // scheduler's yield), and the prompts that ran in those pauses.
  std::atomic<uint64_t> step_yields{0};
  std::atomic<uint64_t> yield_prompts{0};

  // Gauges, refreshed at every token boundary.
  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> running{0};
  std::atomic<int64_t> kv_sequences_used{0};
  std::atomic<int64_t> kv_sequences_capacity{0};
  std::atomic<int64_t> kv_tokens_used{0};
  std::atomic<int64_t> kv_tokens_capacity{0};
  std::atomic<int64_t> preempted{0};        // sequences waiting to be re-admitted
  std::atomic<uint64_t> preemptions{0};     // sequences preempted for KV room
  std::atomic<uint64_t> kv_io_failures{0};  // requests whose KV a flash error broke
  // The memory budget (read live for /metrics; null: none), admissions that
  // waited for its room, and requests refused because they could never fit.
  const MemoryBudget* budget = nullptr;
  std::atomic<uint64_t> mem_waits{0};
  std::atomic<uint64_t> mem_refused{0};

  // Image encodes run between steps (sliced): started, time slices run,
  // prompts that joined an encode already under way for the same picture,
  // and encodes dropped because every request waiting for them went away.
  std::atomic<uint64_t> vision_encodes{0};
  std::atomic<uint64_t> vision_encode_slices{0};
  std::atomic<uint64_t> vision_encodes_shared{0};
  std::atomic<uint64_t> vision_encodes_dropped{0};

  // The KV cache's counters (kv::KvStats), copied at every token boundary.
  void set_kv(const kv::KvStats& s) {
    std::lock_guard lock(kv_mu_);
    kv_ = s;
  }
  kv::KvStats kv() const {
    std::lock_guard lock(kv_mu_);
    return kv_;
  }

  Histogram time_to_first_token{Histogram::latency_buckets()};  // seconds
  Histogram inter_token_latency{Histogram::latency_buckets()};  // seconds
  Histogram step_duration{Histogram::latency_buckets()};        // seconds

 private:
  mutable std::mutex kv_mu_;
  kv::KvStats kv_;
};

}  // namespace tern::sched
