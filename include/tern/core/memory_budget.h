#pragma once
// One byte budget for the memory that grows with traffic: KV blocks in DRAM,
// cached image embeddings, and the embedding rows running requests hold.
// Each pool charges what it holds and uncharges what it gives back; a charge
// that does not fit can ask other pools' reclaimers to give bytes back
// first. The budget knows nothing of what the bytes are (no KV, no images).
//
// Pools:
//   Kv          DRAM frames holding KV blocks (used or cached), plus the flash
//               staging buffers (charged once, at start)
//   MmCache     the embedding cache's DRAM entries (all evictable)
//   MmRequests  embedding rows of admitted requests, reserved at admission
//               (a request's images: tokens x n_embd x 4 bytes each)
//   MmPixels    decoded images and video frames (width x height x 3 bytes),
//               from decoding through the queue until the request lets go;
//               capped on its own (set_limit) so pictures waiting in the
//               queue can never take the room running requests need
//
// Threads: every call is thread-safe. A reclaimer runs on the thread of the
// charge() that asked it, with no lock of the budget held, so it may call
// uncharge(). The KV's reclaimer must run on the engine thread: only the
// engine thread names MemPool::Kv in charge()'s `from`.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>

namespace tern {

enum class MemPool : uint8_t { Kv, MmCache, MmRequests, MmPixels };
inline constexpr int kMemPools = 4;
const char* mem_pool_name(MemPool p);  // "kv", "mm_cache", "mm_requests", "mm_pixels"

struct MemoryBudgetStats {
  size_t total = 0;
  size_t used[kMemPools] = {};
  size_t peak[kMemPools] = {};         // highest `used` per pool since start
  size_t peak_all = 0;                 // highest sum of every pool
  uint64_t reclaimed[kMemPools] = {};  // bytes given back to a reclaim request, per pool
  uint64_t refused = 0;                // charge() / try_charge() calls that did not fit
};

class MemoryBudget {
 public:
  explicit MemoryBudget(size_t total_bytes);
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  size_t total() const { return total_; }
  size_t used() const;
  size_t used(MemPool p) const;
  size_t free() const;  // total - used (0 when forced past it)

  // Takes `bytes` for p when they fit now; calls no reclaimer.
  bool try_charge(MemPool p, size_t bytes);
  // Takes `bytes` for p, first asking the reclaimers of the pools in `from`
  // (in that order) for what is missing. False (nothing taken) when even
  // that is not enough.
  bool charge(MemPool p, size_t bytes, std::initializer_list<MemPool> from);
  // Takes `bytes` even past the total: for memory that is in use already
  // and cannot wait (counted in the peak, so a test sees it).
  void force_charge(MemPool p, size_t bytes);
  void uncharge(MemPool p, size_t bytes);
  // The most p may hold (try_charge and charge refuse past it; force_charge
  // does not). Default: no limit of its own.
  void set_limit(MemPool p, size_t bytes);
  size_t limit(MemPool p) const;

  // fn(want) gives back about `want` bytes of p's own (calling uncharge for
  // them) and returns the bytes it gave back. An empty fn removes it.
  using Reclaimer = std::function<size_t(size_t want)>;
  void set_reclaimer(MemPool p, Reclaimer fn);
  // free() plus what the pools in `from` hold: the most charge() could find.
  size_t reachable(std::initializer_list<MemPool> from) const;

  MemoryBudgetStats stats() const;

 private:
  bool take_locked(MemPool p, size_t bytes, bool force);
  bool over_limit_locked(MemPool p, size_t bytes) const;

  const size_t total_;
  mutable std::mutex mu_;
  MemoryBudgetStats st_;          // (mu_)
  size_t limit_[kMemPools];       // (mu_) per-pool caps (SIZE_MAX: none)
  Reclaimer reclaim_[kMemPools];  // (mu_) copied out before a call
};

// Bytes held for one owner, uncharged when it is destroyed. Move-only.
class MemoryCharge {
 public:
  MemoryCharge() = default;
  MemoryCharge(MemoryBudget* b, MemPool p, size_t bytes) : b_(b), p_(p), bytes_(bytes) {}
  ~MemoryCharge() { reset(); }
  MemoryCharge(MemoryCharge&& o) noexcept : b_(o.b_), p_(o.p_), bytes_(o.bytes_) { o.b_ = nullptr; }
  MemoryCharge& operator=(MemoryCharge&& o) noexcept {
    if (this != &o) {
      reset();
      b_ = o.b_, p_ = o.p_, bytes_ = o.bytes_;
      o.b_ = nullptr;
    }
    return *this;
  }
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;

  size_t bytes() const { return b_ ? bytes_ : 0; }
  // Moves `n` of these bytes (at most bytes()) into a charge of their own,
  // so parts of one reservation can be let go of separately.
  MemoryCharge split(size_t n) {
    if (!b_) return {};
    n = n < bytes_ ? n : bytes_;
    bytes_ -= n;
    return MemoryCharge(b_, p_, n);
  }
  // Adds `o`'s bytes to this charge (same budget and pool, or this one empty).
  void merge(MemoryCharge&& o) {
    if (!o.b_) return;
    if (!b_) {
      *this = std::move(o);
      return;
    }
    bytes_ += o.bytes_;
    o.b_ = nullptr;
  }
  void reset() {
    if (b_) b_->uncharge(p_, bytes_);
    b_ = nullptr;
  }

 private:
  MemoryBudget* b_ = nullptr;
  MemPool p_ = MemPool::Kv;
  size_t bytes_ = 0;
};

}  // namespace tern
