#include "admission.h"

namespace tern::sched {
namespace {

using Waiting = AdmissionSnapshot::Waiting;

// At equal load: preempted before new, then older first.
bool goes_before(const Waiting& a, const Waiting& b) {
  if (a.preempted != b.preempted) return a.preempted;
  return a.order < b.order;
}

}  // namespace

int AdmissionSnapshot::load(std::string_view client) const {
  int n = 0;
  for (const Running& r : running) n += r.client == client ? 1 : 0;
  return n;
}

std::optional<size_t> next_candidate(const AdmissionSnapshot& s) {
  std::optional<size_t> best;
  int best_load = 0;
  for (size_t i = 0; i < s.waiting.size(); ++i) {
    const Waiting& w = s.waiting[i];
    if (w.held) continue;
    const int l = s.load(w.client);
    if (!best || l < best_load || (l == best_load && goes_before(w, s.waiting[*best]))) {
      best = i;
      best_load = l;
    }
  }
  return best;
}

std::optional<size_t> yield_victim(const AdmissionSnapshot& s, size_t candidate) {
  const std::string_view client = s.waiting[candidate].client;
  const int floor = s.load(client) + 2;
  std::optional<size_t> best;
  int best_load = 0;
  for (size_t i = 0; i < s.running.size(); ++i) {
    const AdmissionSnapshot::Running& r = s.running[i];
    if (!r.can_yield || r.client == client) continue;
    const int l = s.load(r.client);
    if (l < floor) continue;
    // The busiest client; within it (or a tie between clients), the newest.
    if (!best || l > best_load || (l == best_load && r.order > s.running[*best].order)) {
      best = i;
      best_load = l;
    }
  }
  return best;
}

bool AdmissionRoom::fits(int64_t tokens) const {
  if (taken >= max_batch || seq_slots <= 0) return false;
  if (taken == 0) return true;
  if (kv_budget > 0 && kv_used + tokens > kv_budget) return false;
  return blocks_for(tokens) <= blocks;
}

void AdmissionRoom::take(int64_t tokens) {
  taken += 1;
  seq_slots -= 1;
  kv_used += tokens;
  blocks -= blocks_for(tokens);
  planned += blocks_for(tokens);
}

}  // namespace tern::sched
