#include "model_drafter.h"

#include <cmath>
#include <exception>
#include <limits>
#include <unordered_set>

#include "sched_log.h"
#include "tern/engine/engine.h"
#include "tern/kv/kv_types.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::sched {
namespace {

struct Pick {
  int32_t token = 0;
  float prob = 0;
};

// The most likely of the first n_vocab logits, and its softmax probability.
Pick greedy(std::span<const float> logits, int32_t n_vocab) {
  const size_t n = std::min(logits.size(), size_t(n_vocab));
  Pick best;
  float m = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    if (logits[i] > m) {
      m = logits[i];
      best.token = int32_t(i);
    }
  }
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - double(m));
  best.prob = sum > 0 ? float(1.0 / sum) : 0.0f;
  return best;
}

}  // namespace

ModelDrafter::ModelDrafter(Engine& draft) : draft_(draft) {}

ModelDrafter::~ModelDrafter() {
  drop_all();
}

ModelDrafter::Track* ModelDrafter::track(uint64_t key) {
  if (auto it = tracks_.find(key); it != tracks_.end()) return &it->second;
  if (draft_.free_sequences() <= 0) return nullptr;
  kv::SeqKeys keys;
  keys.publish = false;  // a draft's KV is nobody's prefix
  Track t;
  t.seq = draft_.new_sequence(keys);
  return &tracks_.emplace(key, t).first->second;
}

void ModelDrafter::drop(uint64_t key) {
  auto it = tracks_.find(key);
  if (it == tracks_.end()) return;
  draft_.free_sequence(it->second.seq);
  tracks_.erase(it);
}

void ModelDrafter::drop_all() {
  for (auto& [key, t] : tracks_) draft_.free_sequence(t.seq);
  tracks_.clear();
}

void ModelDrafter::retain(std::span<const uint64_t> live) {
  if (tracks_.empty()) return;
  const std::unordered_set<uint64_t> keep(live.begin(), live.end());
  std::vector<uint64_t> gone;
  for (const auto& [key, t] : tracks_)
    if (!keep.contains(key)) gone.push_back(key);
  for (uint64_t key : gone) drop(key);
}

// Each wanting sequence's first entry feeds its context from what the draft
// KV holds to its end (the last token uncommitted, so it can be fed again
// next time), or, when that is more than kCatchUpChunk, only the next chunk
// (committed, no guess this step). Each later pass feeds the newest guess
// alone, uncommitted, after the positions the earlier passes wrote
// (BatchEntry::skip), and takes one more guess: k guesses cost k tokens.
void ModelDrafter::propose(std::span<const Want> wants) {
  struct Live {
    const Want* want;
    Track* track;
    std::vector<int32_t> feed;  // this pass's tokens
    int commit = 0;             // of them, committed after the first pass
    bool guessing = true;
    int skip = 0;  // uncommitted positions written before the feed (later passes)
  };
  std::vector<Live> live;
  live.reserve(wants.size());
  const int32_t n_vocab = draft_.tokenizer().n_vocab();
  try {
    for (const Want& w : wants) {
      w.out->clear();
      Track* t = track(w.key);
      if (!t) continue;
      const int have = int(w.context.size());
      if (have <= t->n || draft_.seq_len(t->seq) != t->n) {
        drop(w.key);  // the context is not an extension of what the draft holds
        continue;
      }
      const bool catch_up = have - t->n > kCatchUpChunk + 1;
      const int feed = catch_up ? kCatchUpChunk : have - t->n;
      const int room = catch_up ? feed : feed + w.k;
      if (draft_.reserve(t->seq, room).room != Engine::Room::Ok) {
        drop(w.key);
        continue;
      }
      const auto tokens = w.context.subspan(size_t(t->n), size_t(feed));
      live.push_back(
          {&w, t, {tokens.begin(), tokens.end()}, catch_up ? feed : feed - 1, !catch_up});
    }
    for (bool first = true; !live.empty(); first = false) {
      batch_.entries.clear();
      for (const Live& l : live) {
        BatchEntry e;
        e.seq = l.track->seq;
        e.tokens = l.feed;
        e.logits = l.guessing ? LogitsMode::Last : LogitsMode::None;
        e.commit = !l.guessing;
        e.skip = l.skip;
        batch_.entries.push_back(e);
      }
      draft_.step(batch_, out_);
      ++steps_;
      fed_ += batch_.total_tokens();
      std::vector<Live> next;
      for (size_t i = 0; i < live.size(); ++i) {
        Live& l = live[i];
        if (first) {
          if (l.guessing) draft_.commit(l.track->seq, std::span(l.feed).first(size_t(l.commit)));
          l.track->n += l.commit;
        }
        if (!l.guessing) continue;
        const Pick p = greedy(out_.last(int(i)), n_vocab);
        l.want->out->push_back(p.token);
        if (p.prob < kMinProb || int(l.want->out->size()) >= l.want->k) continue;
        // Next pass: the newest guess, after the last context token and the
        // earlier guesses (written uncommitted by the passes before).
        l.feed.assign(1, p.token);
        l.skip = int(l.want->out->size());
        next.push_back(std::move(l));
      }
      live = std::move(next);
    }
  } catch (const std::exception& e) {
    // Guesses are optional: a draft-engine failure (no KV room, a flash
    // error) costs this step's guesses and the draft's KV, nothing else.
    logger()->warn("draft model: {}; guessing starts over", e.what());
    for (const Want& w : wants) w.out->clear();
    drop_all();
  }
}

}  // namespace tern::sched
