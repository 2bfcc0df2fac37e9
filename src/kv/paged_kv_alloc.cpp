// PagedKv: block bookkeeping, frames, LRU eviction, spilling and reloads.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "paged_kv_impl.h"
#include "tern/core/log.h"
#include "tern/core/memory_budget.h"

namespace tern::kv {
namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = log::get("kv");
  return l;
}

}  // namespace

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// --- Gauges and lists ----------------------------------------------------

// A block's share of the gauges; every change to a block's refs, place,
// fullness or write state sits between uncount() and count().
void PagedKvImpl::uncount(const Block& b) {
  if (b.refs <= 0) return;
  if (b.where == Where::Dram && b.full && !b.writing) --spillable;
  if (b.where == Where::Flash) --streamed;
}
void PagedKvImpl::count(const Block& b) {
  if (b.refs <= 0) return;
  if (b.where == Where::Dram && b.full && !b.writing) ++spillable;
  if (b.where == Where::Flash) ++streamed;
}

void PagedKvImpl::lru_push(int32_t id, InLru which) {
  LruList& l = lru_list(which);
  Block& b = blocks[size_t(id)];
  b.lru = which;
  b.prev = l.tail;
  b.next = -1;
  (l.tail >= 0 ? blocks[size_t(l.tail)].next : l.head) = id;
  l.tail = id;
  l.count += 1;
}

void PagedKvImpl::lru_remove(int32_t id) {
  Block& b = blocks[size_t(id)];
  if (b.lru == InLru::None) return;
  LruList& l = lru_list(b.lru);
  (b.prev >= 0 ? blocks[size_t(b.prev)].next : l.head) = b.next;
  (b.next >= 0 ? blocks[size_t(b.next)].prev : l.tail) = b.prev;
  b.prev = b.next = -1;
  b.lru = InLru::None;
  l.count -= 1;
}

void PagedKvImpl::expire_pins() {
  if (lru_pinned.head < 0) return;
  const int64_t now = steady_ns();
  // Pinned in release order with one TTL, so the head expires first; a block
  // pinned again is pushed to the tail.
  while (lru_pinned.head >= 0 && blocks[size_t(lru_pinned.head)].pin_until <= now) {
    const int32_t id = lru_pinned.head;
    lru_remove(id);
    lru_push_front(id, InLru::Dram);
  }
}

void PagedKvImpl::ref(int32_t id) {
  Block& b = blocks[size_t(id)];
  uncount(b);
  lru_remove(id);
  b.refs += 1;
  count(b);
}

void PagedKvImpl::unref(int32_t id) {
  // A load in flight writes into the block's frame: settle it before the
  // block can be freed and its frame reused.
  if (blocks[size_t(id)].where == Where::Loading) reap_loads();
  Block& b = blocks[size_t(id)];
  uncount(b);
  b.refs -= 1;
  if (b.refs > 0) {
    count(b);
    return;
  }
  if (b.hashed && (b.where == Where::Dram || b.where == Where::Loading)) {
    lru_push(id, b.pin_until > steady_ns() ? InLru::Pinned : InLru::Dram);
  } else if (b.hashed && b.where == Where::Flash) {
    lru_push(id, InLru::Flash);
  } else {
    free_block(id);
  }
}

int32_t PagedKvImpl::new_block() {
  if (free_ids.empty()) throw KvFullError("KV cache: no block records left");
  const int32_t id = free_ids.back();
  free_ids.pop_back();
  return id;
}

// Forgets an unreferenced block: its frame and slot return to the pools.
void PagedKvImpl::free_block(int32_t id) {
  Block& b = blocks[size_t(id)];
  lru_remove(id);
  if (b.frame >= 0) give_frame(b.frame);
  if (b.slot >= 0) flash->free_slot(b.slot);
  if (b.hashed) index.erase(b.hash);
  emit_removed(b);
  b = Block{};
  free_ids.push_back(id);
}

void PagedKvImpl::lose_block(int32_t id, const std::string& why) {
  Block& b = blocks[size_t(id)];
  if (b.where == Where::Lost) return;
  logger()->error("{}", why);
  uncount(b);
  lru_remove(id);
  if (b.hashed) index.erase(b.hash);
  emit_removed(b);
  b.hashed = false;
  if (b.frame >= 0) give_frame(b.frame);
  if (b.slot >= 0) flash->free_slot(b.slot);
  b.frame = -1;
  b.slot = -1;
  b.where = Where::Lost;
  if (b.refs == 0) {
    free_block(id);
    return;
  }
  for (Seq& s : seqs) {
    if (s.live && s.error.empty() &&
        std::find(s.table.begin(), s.table.end(), id) != s.table.end()) {
      s.error = why;
    }
  }
}

void PagedKvImpl::wait_timed(IoGroup& g) {
  const auto t0 = std::chrono::steady_clock::now();
  if (flash->wait(g)) {
    st.prefetch_stalls += 1;
    st.prefetch_stall_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
}

// --- Reloading cached blocks from flash ----------------------------------

int32_t PagedKvImpl::take_frame_cheap() {
  if (const int32_t f = take_free_frame(/*reclaim=*/false); f >= 0) return f;
  // A cached block that also has a clean flash copy gives its frame up for free.
  int walked = 0;
  for (int32_t id = lru_dram.head; id >= 0 && walked < 64; id = blocks[size_t(id)].next, ++walked) {
    Block& b = blocks[size_t(id)];
    if (b.where != Where::Dram || b.slot < 0) continue;
    lru_remove(id);
    const int32_t f = b.frame;
    b.frame = -1;
    b.where = Where::Flash;
    lru_push(id, InLru::Flash);
    return f;
  }
  return -1;
}

void PagedKvImpl::start_load(int32_t id, int32_t frame) {
  Block& b = blocks[size_t(id)];
  uncount(b);
  b.frame = frame;
  b.where = Where::Loading;
  b.io_status = 0;
  count(b);
  for (int l = 0; l < L.n_layers; ++l) {
    flash->read(b.slot, l, 1, frame_ptr(frame) + size_t(l) * L.slice_bytes, load_io, &b.io_status);
  }
  loading.push_back(id);
}

void PagedKvImpl::start_write(int32_t id) {
  Block& b = blocks[size_t(id)];
  b.io_status = 0;
  for (int l = 0; l < L.n_layers; ++l) {
    flash->write(b.slot, l, frame_ptr(b.frame) + size_t(l) * L.slice_bytes, write_io, &b.io_status);
  }
}

void PagedKvImpl::reap_loads() {
  if (loading.empty()) return;
  wait_timed(load_io);
  for (int32_t id : loading) {
    Block& b = blocks[size_t(id)];
    if (b.io_status == 0) {
      uncount(b);
      b.where = Where::Dram;
      count(b);
      st.bytes_reloaded += int64_t(L.block_bytes);
    } else {
      st.read_errors += 1;
      lose_block(id, "KV flash tier: reading a cached block from " + flash->path() +
                         " failed: " + std::strerror(-b.io_status));
    }
  }
  loading.clear();
}

// --- Frames and the memory budget ---------------------------------------

int32_t PagedKvImpl::take_free_frame(bool reclaim) {
  if (free_frames.empty()) return -1;
  if (MemoryBudget* mb = cfg.budget) {
    // Cached image embeddings give way to KV; nothing else is asked.
    const bool ok = reclaim ? mb->charge(MemPool::Kv, L.block_bytes, {MemPool::MmCache})
                            : mb->try_charge(MemPool::Kv, L.block_bytes);
    if (!ok) return -1;
  }
  const int32_t f = free_frames.back();
  free_frames.pop_back();
  return f;
}

int32_t PagedKvImpl::take_free_frame_forced() {
  if (cfg.budget) cfg.budget->force_charge(MemPool::Kv, L.block_bytes);
  const int32_t f = free_frames.back();
  free_frames.pop_back();
  return f;
}

void PagedKvImpl::give_frame(int32_t frame) {
  free_frames.push_back(frame);
  if (!cfg.budget) return;
  cfg.budget->uncharge(MemPool::Kv, L.block_bytes);
  // The bytes go back to the OS too, so resident memory follows the budget
  // (the next use of the frame faults in zero pages). Only the whole pages
  // inside the frame: a frame is not page-aligned, and its neighbours' bytes
  // must survive.
  static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(frame_ptr(frame)) + page - 1) & ~(page - 1);
  const uintptr_t end = (uintptr_t(frame_ptr(frame)) + L.block_bytes) & ~(page - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

int64_t PagedKvImpl::usable_free_frames() const {
  const int64_t n = int64_t(free_frames.size());
  if (!cfg.budget) return n;
  return std::min<int64_t>(n, int64_t(cfg.budget->reachable({MemPool::MmCache}) / L.block_bytes));
}

size_t PagedKvImpl::give_back(size_t bytes) {
  if (in_step || bytes == 0) return 0;
  expire_pins();
  const int64_t want = std::min<int64_t>(int64_t((bytes + L.block_bytes - 1) / L.block_bytes),
                                         lru_dram.count + lru_pinned.count);
  if (want <= 0) return 0;
  const int64_t free_before = int64_t(free_frames.size());
  try {
    obtain_frames(want, /*cached_only=*/true);
  } catch (const Error& e) {  // a flash write failed: what it could free is free
    logger()->warn("KV: giving memory back: {}", e.what());
  }
  for (int32_t f : scratch_frames) give_frame(f);
  scratch_frames.clear();
  return size_t(std::max<int64_t>(0, int64_t(free_frames.size()) - free_before)) * L.block_bytes;
}

// --- Making room ---------------------------------------------------------

int64_t PagedKvImpl::available_blocks() const {
  int64_t a = usable_free_frames() + lru_dram.count + lru_pinned.count;
  if (flash && !suspended) {  // a suspended step reads its live blocks in place
    const int64_t slots = flash->free_slots() + lru_flash.count;
    a += std::max<int64_t>(0, std::min({spillable, stage_cap - streamed, slots}));
  }
  return a;
}

int64_t PagedKvImpl::take_slot() {
  int64_t s = flash->alloc_slot();
  if (s < 0 && lru_flash.head >= 0) {
    free_block(lru_flash.head);  // the least recently used block cached only on flash
    st.blocks_dropped += 1;
    s = flash->alloc_slot();
  }
  return s;
}

// The oldest full DRAM block of the sequence with the most of them,
// preferring blocks no other sequence shares (a spilled shared block is
// streamed for every sharer).
int32_t PagedKvImpl::pick_spill_victim() {
  auto candidate = [&](int32_t id) {
    const Block& b = blocks[size_t(id)];
    return b.where == Where::Dram && b.full && b.refs > 0 && !b.writing;
  };
  const Seq* best = nullptr;
  int64_t best_n = 0;
  for (const Seq& s : seqs) {
    if (!s.live) continue;
    const int64_t n = std::count_if(s.table.begin(), s.table.end(), candidate);
    if (n > best_n) best = &s, best_n = n;
  }
  if (!best) return -1;
  int32_t shared = -1;
  for (int32_t id : best->table) {
    if (!candidate(id)) continue;
    if (blocks[size_t(id)].refs == 1) return id;
    if (shared < 0) shared = id;
  }
  return shared;
}

void PagedKvImpl::obtain_frames(int64_t need, bool cached_only) {
  scratch_frames.clear();
  scratch_victims.clear();
  reap_loads();
  expire_pins();
  const int64_t from_free = cached_only ? 0 : std::min<int64_t>(need, usable_free_frames());
  const int64_t from_lru = std::min(need - from_free, lru_dram.count + lru_pinned.count);
  // Flash slots are kept for the spills this call needs; write-backs of
  // cached blocks get the rest, and a cached block with no room is dropped.
  int64_t writebacks =
      flash ? flash->free_slots() + lru_flash.count - (need - from_free - from_lru) : 0;
  int64_t live_spills = 0;
  int64_t dropped = 0;  // cached_only: frames freed by forgetting a cached block count too
  auto pending = [&] {
    return int64_t(scratch_frames.size() + scratch_victims.size()) + (cached_only ? dropped : 0);
  };
  // Each side of the memory budget evicts its own cache first: free frames
  // the budget has room for, then cached KV blocks, then room the embedding
  // cache gives back, then spills of live blocks.
  int32_t free_frame = -1;
  while (pending() < need) {
    if (!cached_only && (free_frame = take_free_frame(/*reclaim=*/false)) >= 0) {
      scratch_frames.push_back(free_frame);
    } else if (lru_dram.head >= 0 || lru_pinned.head >= 0) {
      // Pinned blocks go last, oldest pin first: past the DRAM budget a
      // session's KV is written to flash (found again there), not dropped.
      const int32_t id = lru_dram.head >= 0 ? lru_dram.head : lru_pinned.head;
      Block& b = blocks[size_t(id)];
      if (b.lru == InLru::Pinned) st.pinned_evicted += 1;
      lru_remove(id);
      if (b.slot >= 0) {  // a clean copy is on flash already
        scratch_frames.push_back(b.frame);
        b.frame = -1;
        b.where = Where::Flash;
        lru_push(id, InLru::Flash);
      } else if (writebacks > 0 && (b.slot = take_slot()) >= 0) {
        writebacks -= 1;
        b.writing = true;
        start_write(id);
        scratch_victims.push_back(id);
      } else {
        free_block(id);  // no room on flash: forget it
        st.blocks_dropped += 1;
        dropped += 1;
      }
    } else if (!cached_only && (free_frame = take_free_frame(/*reclaim=*/true)) >= 0) {
      scratch_frames.push_back(free_frame);
    } else if (!cached_only && !suspended && flash && spillable > 0 &&
               streamed + live_spills < stage_cap) {
      const int32_t id = pick_spill_victim();
      if (id < 0) break;
      Block& b = blocks[size_t(id)];
      uncount(b);
      if (b.slot >= 0) {
        scratch_frames.push_back(b.frame);
        b.frame = -1;
        b.where = Where::Flash;
        st.blocks_spilled += 1;
      } else if ((b.slot = take_slot()) >= 0) {
        b.writing = true;
        start_write(id);
        scratch_victims.push_back(id);
        live_spills += 1;
      }
      const bool stuck = !b.writing && b.where == Where::Dram;
      count(b);
      if (stuck) break;
    } else {
      break;
    }
  }
  std::string error;
  if (!scratch_victims.empty()) {
    flash->submit();
    flash->wait(write_io);
    for (int32_t id : scratch_victims) {
      Block& b = blocks[size_t(id)];
      uncount(b);
      b.writing = false;
      if (b.io_status == 0) {
        st.bytes_spilled += int64_t(L.block_bytes);
        (b.refs > 0 ? st.blocks_spilled : st.blocks_evicted_to_flash) += 1;
        scratch_frames.push_back(b.frame);
        b.frame = -1;
        b.where = Where::Flash;
        if (b.refs == 0) lru_push(id, InLru::Flash);
        count(b);
        continue;
      }
      st.write_errors += 1;
      error = std::strerror(-b.io_status);
      flash->free_slot(b.slot);
      b.slot = -1;
      if (b.refs == 0) {  // a cached block: drop it, its frame is still good
        free_block(id);
        st.blocks_dropped += 1;
        scratch_frames.push_back(take_free_frame_forced());
      } else {
        count(b);  // a live block stays in DRAM
      }
    }
  }
  if (int64_t(scratch_frames.size()) + (cached_only ? dropped : 0) >= need) return;
  for (int32_t f : scratch_frames) give_frame(f);
  scratch_frames.clear();
  if (!error.empty()) {
    logger()->error("KV flash tier: writing to {} failed: {}", flash->path(), error);
    throw KvIoError("KV flash tier: writing a block to " + flash->path() + " failed: " + error);
  }
  throw KvFullError("KV cache full: " + std::to_string(need) + " more blocks needed, " +
                    std::to_string(available_blocks()) + " can be freed");
}

void PagedKvImpl::reserve(SeqId id, int n_new) {
  Seq& s = seq(id);
  if (in_step) throw InvalidArgument("KV: reserve() during a forward step");
  if (!s.error.empty()) throw KvIoError(s.error);
  if (n_new < 0) throw InvalidArgument("KV: reserve() of a negative token count");
  const int64_t total = int64_t(s.length) + n_new;
  if (total > cfg.max_seq_tokens) {
    throw InvalidArgument("context full: sequence would hold " + std::to_string(total) +
                          " tokens, the context holds " + std::to_string(cfg.max_seq_tokens));
  }
  const int64_t B = L.block_tokens;
  const int64_t need = (total + B - 1) / B - int64_t(s.table.size());
  if (need <= 0) return;
  const int64_t avail = available_blocks();
  if (need > avail) {
    std::string why = "KV cache full: sequence " + std::to_string(id) + " needs " +
                      std::to_string(need) + " more blocks of " + std::to_string(B) + " tokens, " +
                      std::to_string(avail) + " can be freed";
    if (flash && stage_cap - streamed < spillable) {
      why += " (flash staging streams at most " + std::to_string(stage_cap) +
             " blocks of live sequences: raise --kv-staging-mb or --kv-dram-mb)";
    }
    throw KvFullError(why);
  }
  obtain_frames(need);
  if (int64_t(free_ids.size()) < need) {  // only lost blocks can hold records without room
    for (int32_t f : scratch_frames) give_frame(f);
    scratch_frames.clear();
    throw KvFullError("KV cache: no block records left");
  }
  for (int32_t f : scratch_frames) {
    const int32_t bid = new_block();
    Block& b = blocks[size_t(bid)];
    b.where = Where::Dram;
    b.frame = f;
    b.refs = 1;
    s.table.push_back(bid);
  }
  scratch_frames.clear();
}

}  // namespace tern::kv
