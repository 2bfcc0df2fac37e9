#pragma once
// How `tern run` and `tern chat` generate: as clients of the same scheduler
// the server drives (a single sequence is a batch of one), so both get the
// server's decode loop and its prefix cache: a chat turn reuses the KV of the
// turns before it.
//
// Text is written to stdout as it arrives. Ctrl-C cancels the request in
// flight through Scheduler::cancel (at a prompt, with nothing in flight, it
// ends the process as usual); a closed stdout cancels it too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tern/sampling/params.h"
#include "tern/sched/metrics.h"
#include "tern/sched/scheduler.h"
#include "tern/sched/sync_client.h"

namespace tern {
class Engine;
}

namespace tern::cli {

class InterruptWatcher;  // local_generator.cpp

struct LocalResult {
  sched::Finish finish;
  std::string text;   // the generated text, as printed
  uint64_t seed = 0;  // the sampling seed used (drawn here when none was given)
};

class LocalGenerator {
 public:
  explicit LocalGenerator(Engine& engine);
  ~LocalGenerator();

  // Generates a continuation of `prompt`, printing it to stdout; throws
  // InvalidArgument for a prompt the scheduler refuses.
  // media: the prompt's image spans (engine/media_prompt.h), if any; lora:
  // the adapter to run with (none: the base model).
  LocalResult generate(std::vector<int32_t> prompt, SamplingParams params,
                       std::vector<vision::MediaSpan> media = {}, LoraSelection lora = {});

 private:
  sched::Metrics metrics_;
  sched::Scheduler scheduler_;
  sched::SyncClient client_;
  std::unique_ptr<InterruptWatcher> interrupt_;
  int n_requests_ = 0;
};

// "prompt: N tokens (M cached) in X ms (Y t/s); generated K tokens in Z ms
// (W t/s); finish: REASON; seed S" on stderr.
void print_stats(const LocalResult& r);

}  // namespace tern::cli
