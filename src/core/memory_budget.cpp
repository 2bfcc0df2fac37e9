#include "tern/core/memory_budget.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <iterator>

namespace tern {

const char* mem_pool_name(MemPool p) {
  switch (p) {
    case MemPool::Kv:
      return "kv";
    case MemPool::MmCache:
      return "mm_cache";
    case MemPool::MmRequests:
      return "mm_requests";
    case MemPool::MmPixels:
      return "mm_pixels";
  }
  return "?";
}

MemoryBudget::MemoryBudget(size_t total_bytes) : total_(total_bytes) {
  st_.total = total_bytes;
  std::fill(std::begin(limit_), std::end(limit_), SIZE_MAX);
}

namespace {
size_t sum(const size_t (&u)[kMemPools]) {
  size_t s = 0;
  for (size_t v : u) s += v;
  return s;
}
}  // namespace

size_t MemoryBudget::used() const {
  std::lock_guard lock(mu_);
  return sum(st_.used);
}

size_t MemoryBudget::used(MemPool p) const {
  std::lock_guard lock(mu_);
  return st_.used[int(p)];
}

size_t MemoryBudget::free() const {
  std::lock_guard lock(mu_);
  const size_t u = sum(st_.used);
  return u >= total_ ? 0 : total_ - u;
}

bool MemoryBudget::over_limit_locked(MemPool p, size_t bytes) const {
  const size_t mine = st_.used[int(p)], cap = limit_[int(p)];
  return mine > cap || bytes > cap - mine;
}

bool MemoryBudget::take_locked(MemPool p, size_t bytes, bool force) {
  const size_t u = sum(st_.used);
  if (!force && (u > total_ || bytes > total_ - u || over_limit_locked(p, bytes))) return false;
  size_t& mine = st_.used[int(p)];
  mine += bytes;
  st_.peak[int(p)] = std::max(st_.peak[int(p)], mine);
  st_.peak_all = std::max(st_.peak_all, u + bytes);
  return true;
}

bool MemoryBudget::try_charge(MemPool p, size_t bytes) {
  std::lock_guard lock(mu_);
  if (take_locked(p, bytes, false)) return true;
  st_.refused += 1;
  return false;
}

void MemoryBudget::force_charge(MemPool p, size_t bytes) {
  std::lock_guard lock(mu_);
  take_locked(p, bytes, true);
}

bool MemoryBudget::charge(MemPool p, size_t bytes, std::initializer_list<MemPool> from) {
  for (MemPool q : from) {
    Reclaimer fn;
    size_t missing = 0;
    {
      std::lock_guard lock(mu_);
      if (take_locked(p, bytes, false)) return true;
      if (over_limit_locked(p, bytes)) break;  // no other pool's bytes can help
      const size_t u = sum(st_.used);
      missing = bytes - (u >= total_ ? 0 : total_ - u);
      fn = reclaim_[int(q)];
    }
    if (!fn) continue;
    const size_t got = fn(missing);  // outside the lock: it calls uncharge()
    std::lock_guard lock(mu_);
    st_.reclaimed[int(q)] += got;
  }
  std::lock_guard lock(mu_);
  if (take_locked(p, bytes, false)) return true;
  st_.refused += 1;
  return false;
}

void MemoryBudget::uncharge(MemPool p, size_t bytes) {
  std::lock_guard lock(mu_);
  size_t& mine = st_.used[int(p)];
  assert(bytes <= mine);
  mine -= std::min(bytes, mine);
}

void MemoryBudget::set_limit(MemPool p, size_t bytes) {
  std::lock_guard lock(mu_);
  limit_[int(p)] = bytes;
}

size_t MemoryBudget::limit(MemPool p) const {
  std::lock_guard lock(mu_);
  return limit_[int(p)];
}

void MemoryBudget::set_reclaimer(MemPool p, Reclaimer fn) {
  std::lock_guard lock(mu_);
  reclaim_[int(p)] = std::move(fn);
}

size_t MemoryBudget::reachable(std::initializer_list<MemPool> from) const {
  std::lock_guard lock(mu_);
  const size_t u = sum(st_.used);
  size_t r = u >= total_ ? 0 : total_ - u;
  for (MemPool q : from)
    if (reclaim_[int(q)]) r += st_.used[int(q)];
  return r;
}

MemoryBudgetStats MemoryBudget::stats() const {
  std::lock_guard lock(mu_);
  return st_;
}

}  // namespace tern
