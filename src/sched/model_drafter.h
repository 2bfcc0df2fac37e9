#pragma once
// Speculative guesses from a draft model: a smaller GGUF with the target's
// vocabulary (--draft-model), run by its own Engine on the target's task
// pool, proposes each sequence's next k tokens by k greedy steps, every
// sequence that wants guesses in the same batched pass. Its KV follows each
// sequence's context: the context tokens are committed (only real tokens,
// so it is always a prefix of the context), the guesses are written
// uncommitted and overwritten by the next catch-up, so a rejected guess
// needs no roll-back. Private to the scheduler; engine thread only.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "tern/model/batch.h"

namespace tern {
class Engine;
}

namespace tern::sched {

class ModelDrafter {
 public:
  // The most context a step feeds the draft model for one sequence: a longer
  // one (a new prompt) catches up over several steps before it guesses.
  static constexpr int kCatchUpChunk = 256;
  // A guess is extended only while the draft model gave its last token at
  // least this probability (llama.cpp's draft p_min): unsure guesses are
  // mostly rejected, and each costs a verify row.
  static constexpr float kMinProb = 0.6f;

  explicit ModelDrafter(Engine& draft);
  ~ModelDrafter();
  ModelDrafter(const ModelDrafter&) = delete;
  ModelDrafter& operator=(const ModelDrafter&) = delete;

  struct Want {
    uint64_t key = 0;                     // the sequence (its admission order)
    std::span<const int32_t> context;     // its tokens; the last is the one it feeds next
    int k = 0;                            // guesses wanted (>= 1)
    std::vector<int32_t>* out = nullptr;  // its guesses (cleared first; may stay empty)
  };
  // Up to k guesses for every want, one batched draft step per guess
  // position. A failure of the draft engine costs its guesses, never the
  // sequences: they decode plainly.
  void propose(std::span<const Want> wants);
  // Frees the draft KV of every sequence whose key is not in `live`.
  void retain(std::span<const uint64_t> live);
  // Draft steps run, and tokens they fed (for tests and logs).
  int64_t steps() const { return steps_; }
  int64_t tokens_fed() const { return fed_; }

 private:
  struct Track {
    SeqId seq = -1;
    int n = 0;  // context tokens committed in the draft KV
  };
  Track* track(uint64_t key);
  void drop(uint64_t key);
  void drop_all();

  Engine& draft_;
  std::unordered_map<uint64_t, Track> tracks_;
  Batch batch_;
  StepOutput out_;
  int64_t steps_ = 0;
  int64_t fed_ = 0;
};

}  // namespace tern::sched
