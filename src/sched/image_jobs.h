#pragma once
// Image encodes the scheduler runs between its steps. Private to the
// scheduler; engine thread only.
//
// A prompt whose next chunk reaches an image without rows does not block the
// step: it waits before the image (the text before it may still prefill)
// while its encode -- a vision::EncodeJob -- is advanced by time slices after
// each step. Encodes are keyed by (source, pixel hash): a second prompt with
// the same picture waits on the same encode. Sequences hold their waits
// (shared_ptr); an encode that no sequence waits for any more is dropped, so
// cancelling one of two waiters keeps it and cancelling the last ends it.
// A finished encode's rows go to the source's store (the embedding cache).
#include <deque>
#include <memory>
#include <string>

#include "tern/sched/metrics.h"
#include "tern/vision/embedding_source.h"

namespace tern {
class TaskPool;
}

namespace tern::sched {

// One image being encoded, shared by every sequence waiting for it.
struct ImageWait {
  vision::EmbeddingSource* source = nullptr;
  Sha256Digest hash{};
  uint64_t starter = 0;  // admission order of the sequence that started it (its timings)
  std::unique_ptr<vision::EncodeJob> job;          // null once finished
  std::shared_ptr<const vision::Embeddings> rows;  // when done
  std::string error;                               // when it failed
  double busy_ms = 0;                              // the job's slices, summed

  bool finished() const { return job == nullptr; }
};

class ImageJobs {
 public:
  // The unfinished encode of m's image, or nullptr.
  std::shared_ptr<ImageWait> find(const vision::MediaSpan& m) const;
  // Starts encoding m's image for the sequence admitted as `starter`;
  // nullptr when the source cannot encode in slices.
  std::shared_ptr<ImageWait> start(const vision::MediaSpan& m, uint64_t starter, Metrics& metrics);

  // Drops encodes nobody waits for (their last waiter was cancelled or failed).
  void drop_unwaited(Metrics& metrics);
  bool pending() const { return !jobs_.empty(); }
  // Advances the encodes, oldest first, for about budget_ms (at least one
  // stage); finished ones leave the table with their rows stored.
  void advance(TaskPool& pool, double budget_ms, Metrics& metrics);

 private:
  std::deque<std::shared_ptr<ImageWait>> jobs_;  // unfinished, oldest first
  double ms_per_gflop_ = 0;                      // carried from job to job
};

}  // namespace tern::sched
