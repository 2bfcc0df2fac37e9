#include "tern/sched/metrics.h"

#include <algorithm>

namespace tern::sched {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double value) {
  // First bucket whose upper bound is >= value; past the end is +Inf.
  const size_t b =
      size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  counts_[b] += 1;
  sum_ += value;
  count_ += 1;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  std::lock_guard lock(mu_);
  uint64_t acc = 0;
  s.cumulative.reserve(bounds_.size());
  for (size_t i = 0; i < bounds_.size(); ++i) {
    acc += counts_[i];
    s.cumulative.push_back(acc);
  }
  s.count = count_;
  s.sum = sum_;
  return s;
}

std::vector<double> Histogram::latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
          0.25,  0.5,    0.75,  1.0,  2.5,   5.0,  10.0,  30.0};
}

}  // namespace tern::sched
