#pragma once
// A step's batch and what its pass returns, set aside while the pass is
// paused and a yield round runs its own (Scheduler::yield_round). Private to
// the scheduler.
#include <utility>
#include <vector>

#include "tern/model/batch.h"
#include "tern/sched/scheduler.h"

namespace tern::sched {

class Sequence;

struct Scheduler::StepBuffers {
  Batch batch;
  StepOutput out;
  std::vector<Sequence*> entry_seq;
  std::vector<std::pair<Sequence*, int>> plan;
  std::vector<EmbeddingRun> runs;
  std::vector<std::pair<size_t, size_t>> entry_runs;
};

}  // namespace tern::sched
