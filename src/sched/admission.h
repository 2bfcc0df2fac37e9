#pragma once
// Who is admitted next, and who yields a batch slot to it: the scheduler's
// fairness between clients as a pure policy over a snapshot of plain
// structs. Private to the scheduler; no threads, engine or KV here, so tests
// build snapshots by hand and check the choices.
//
// A client's load is how many of its sequences run, counting the ones
// admitted this round. The next candidate is the waiting one whose client
// has the lowest load; at equal load a preempted sequence goes before a new
// request, and within each line the oldest goes first (so one client's
// requests keep their order). When the candidate does not fit, the newest
// sequence of the client with the highest load yields its slot (it is
// preempted, never failed), but only if that client runs at least two more
// than the candidate's: with one more, yielding would just swap the two
// clients' places. Without such a client admission stops, and nobody
// overtakes the candidate.
//
// What fits is AdmissionRoom's arithmetic over what the engine reported;
// the scheduler applies the choices (preempting, attaching KV) and takes a
// new snapshot after each one.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tern::sched {

struct AdmissionSnapshot {
  // A preempted sequence or a queued request.
  struct Waiting {
    std::string_view client;
    // Its place in its line, smaller is older: admission order for a
    // preempted sequence, queue position for a new request.
    uint64_t order = 0;
    int64_t tokens = 0;  // the context it brings (prompt, or prompt + generated)
    bool preempted = false;
    bool held = false;  // not admissible this round (cancelled, or waits for a sibling)
    size_t ref = 0;     // the caller's handle for it; the policy never reads it
  };
  // A running sequence, or one admitted earlier this round.
  struct Running {
    std::string_view client;
    uint64_t order = 0;      // admission order: larger is newer
    bool can_yield = false;  // holds KV it could give back (not one admitted this round)
    size_t ref = 0;          // the caller's handle
  };
  std::vector<Waiting> waiting;
  std::vector<Running> running;

  void clear() {
    waiting.clear();
    running.clear();
  }
  // Sequences of `client` in `running`.
  int load(std::string_view client) const;
};

// The waiting entry to admit next (an index into s.waiting), or none when
// every entry is held.
std::optional<size_t> next_candidate(const AdmissionSnapshot& s);

// The running entry that yields its slot to s.waiting[candidate] (an index
// into s.running), or none when no client runs at least two more.
std::optional<size_t> yield_victim(const AdmissionSnapshot& s, size_t candidate);

// What admission may still hand out this round. Until something runs or is
// admitted, a candidate fits whatever its size: it gets the whole pool, and
// fails with a clear error later if even that is too small.
struct AdmissionRoom {
  int max_batch = 0;         // SchedulerOptions::max_batch
  int64_t block_tokens = 0;  // tokens per KV block
  int64_t taken = 0;         // sequences running or admitted this round
  int64_t seq_slots = 0;     // KV sequences the engine has free
  int64_t kv_budget = 0;     // SchedulerOptions::kv_tokens (0: no limit)
  int64_t kv_used = 0;       // context tokens of the sequences taken
  int64_t blocks = 0;        // KV blocks free for new contexts
  int64_t planned = 0;  // blocks of the sequences admitted this round (not taken from the pool yet)

  // Blocks a context of n tokens needs, with its first generated token.
  int64_t blocks_for(int64_t n) const { return (n + 1 + block_tokens - 1) / block_tokens; }
  bool fits(int64_t tokens) const;
  // Counts an admitted context of `tokens`.
  void take(int64_t tokens);
};

}  // namespace tern::sched
