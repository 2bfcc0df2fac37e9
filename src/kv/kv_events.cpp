// The ring of prefix-cache events (see kv_events.h).
#include "tern/kv/kv_events.h"

#include <algorithm>

namespace tern::kv {

KvEventLog::KvEventLog(size_t capacity, int block_tokens)
    : ring_(std::max<size_t>(capacity, 1)),
      tokens_(ring_.size() * size_t(std::max(block_tokens, 1))),
      block_tokens_(std::max(block_tokens, 1)) {}

void KvEventLog::on_event(const KvEvent& e) {
  const double ts =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard lock(mu_);
  const size_t i = size_t(next_ % ring_.size());
  Slot& s = ring_[i];
  s.seq = next_++;
  s.ts = ts;
  s.kind = e.kind;
  s.on_flash = e.on_flash;
  s.hash = e.hash;
  s.parent = e.parent;
  s.n_tokens = int(std::min<size_t>(e.tokens.size(), size_t(block_tokens_)));
  std::copy_n(e.tokens.begin(), s.n_tokens, tokens_.begin() + ptrdiff_t(i * size_t(block_tokens_)));
}

std::vector<KvEventLog::Entry> KvEventLog::read(uint64_t after, size_t max_n,
                                                uint64_t* lost) const {
  std::vector<Entry> out;
  std::lock_guard lock(mu_);
  if (lost) *lost = 0;
  if (after >= next_ - 1) return out;  // nothing newer (and after + 1 must not wrap)
  const uint64_t oldest = next_ > ring_.size() ? next_ - ring_.size() : 1;
  uint64_t from = after + 1;
  if (lost) *lost = from < oldest ? oldest - from : 0;
  from = std::max(from, oldest);
  for (uint64_t q = from; q < next_ && out.size() < max_n; ++q) {
    const size_t i = size_t(q % ring_.size());
    const Slot& s = ring_[i];
    const int32_t* t = tokens_.data() + i * size_t(block_tokens_);
    out.push_back(Entry{s.seq, s.ts, s.kind, s.on_flash, s.hash, s.parent,
                        std::vector<int32_t>(t, t + s.n_tokens)});
  }
  return out;
}

uint64_t KvEventLog::last_seq() const {
  std::lock_guard lock(mu_);
  return next_ - 1;
}

}  // namespace tern::kv
