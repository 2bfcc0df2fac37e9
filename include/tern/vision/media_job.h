#pragma once
// A resumable encode of one medium (an image's tiles, an audio clip's
// chunks), as the scheduler's media feed drives it between token steps: the
// one interface over vision::EncodeJob and the audio encoder's job, so the
// feed has one path for every kind of media.
//
// JobOf<Job> wraps any job type with EncodeJob's methods (advance, done,
// take, stages_total, stages_done, slices, busy_ms, ms_per_gflop,
// set_ms_per_gflop) behind it.
#include <memory>
#include <utility>

#include "tern/vision/encoder.h"

namespace tern {
class TaskPool;
}

namespace tern::vision {

class MediaJob {
 public:
  virtual ~MediaJob() = default;
  // Runs stages (kernels on pool) until done or the next one's predicted
  // cost would pass budget_ms; at least one stage a call. Returns done().
  // Throws what the medium's preprocessing throws (a message for the request).
  virtual bool advance(TaskPool& pool, double budget_ms) = 0;
  virtual bool done() const = 0;
  // Every row: (n_tokens, n_embd). Once, after done().
  virtual Embeddings take() = 0;
  virtual int stages_total() const = 0;
  virtual int stages_done() const = 0;
  virtual int slices() const = 0;      // advance() calls that ran a stage
  virtual double busy_ms() const = 0;  // time spent in them
  // The measured GEMM cost (EWMA) that predicts the next stage's; carried
  // from job to job so a first slice fits its budget too.
  virtual double ms_per_gflop() const = 0;
  virtual void set_ms_per_gflop(double v) = 0;
};

template <class Job>
class JobOf final : public MediaJob {
 public:
  explicit JobOf(Job job) : job_(std::move(job)) {}
  bool advance(TaskPool& pool, double budget_ms) override { return job_.advance(pool, budget_ms); }
  bool done() const override { return job_.done(); }
  Embeddings take() override { return job_.take(); }
  int stages_total() const override { return job_.stages_total(); }
  int stages_done() const override { return job_.stages_done(); }
  int slices() const override { return job_.slices(); }
  double busy_ms() const override { return job_.busy_ms(); }
  double ms_per_gflop() const override { return job_.ms_per_gflop(); }
  void set_ms_per_gflop(double v) override { job_.set_ms_per_gflop(v); }

 private:
  Job job_;
};

template <class Job>
std::unique_ptr<MediaJob> job_of(Job job) {
  return std::make_unique<JobOf<Job>>(std::move(job));
}

}  // namespace tern::vision
