// PagedKv::check_invariants(): recounts all bookkeeping from scratch. Tests
// call it after every operation of their random walks.
#include <stdexcept>

#include "paged_kv_impl.h"

namespace tern::kv {
namespace {

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::logic_error("KV invariant violated: " + what);
}

}  // namespace

void PagedKvImpl::check_invariants() const {
  const size_t nb = blocks.size();
  std::vector<int32_t> refs(nb, 0);
  for (const Seq& s : seqs) {
    if (!s.live) continue;
    const int B = L.block_tokens;
    expect(int64_t(s.table.size()) * B >= s.length, "a sequence's length exceeds its blocks");
    expect(int(s.tail.size()) == s.length % B,
           "a sequence's partial-block tokens do not match its length");
    for (int32_t id : s.table) {
      expect(id >= 0 && size_t(id) < nb, "a block table holds a bad id");
      refs[size_t(id)] += 1;
    }
    for (size_t i = 0; i < s.table.size(); ++i) {
      const Block& b = blocks[size_t(s.table[i])];
      const bool done = int64_t(i + 1) * B <= s.length;
      if (done) expect(b.full, "a committed block is not marked full");
      if (!done) {
        expect(b.where == Where::Dram && !b.full && b.refs == 1,
               "a block being filled is not a private DRAM block");
      }
    }
  }
  std::vector<int> frame_users(size_t(n_frames), 0);
  for (int32_t f : free_frames) frame_users[size_t(f)] += 1;
  std::vector<int> slot_users(flash ? size_t(flash->n_slots()) : 0, 0);
  int64_t n_hashed = 0, n_spillable = 0, n_streamed = 0, n_free = 0;
  for (size_t i = 0; i < nb; ++i) {
    const Block& b = blocks[i];
    const std::string id = "block " + std::to_string(i);
    expect(b.refs == refs[i], id + " has refcount " + std::to_string(b.refs) + " but " +
                                  std::to_string(refs[i]) + " table entries");
    expect(!b.writing, id + " has a write in flight outside a reservation");
    if (b.where == Where::Free) {
      expect(b.refs == 0 && b.frame < 0 && b.slot < 0 && !b.hashed && b.lru == InLru::None,
             id + " is free but holds something");
      n_free += 1;
      continue;
    }
    if (b.frame >= 0) frame_users[size_t(b.frame)] += 1;
    if (b.slot >= 0) slot_users[size_t(b.slot)] += 1;
    switch (b.where) {
      case Where::Dram:
        expect(b.frame >= 0, id + " is in DRAM without a frame");
        break;
      case Where::Loading:
        expect(b.frame >= 0 && b.slot >= 0, id + " loads without frame or slot");
        break;
      case Where::Flash:
        expect(b.frame < 0 && b.slot >= 0, id + " is on flash without a slot");
        break;
      case Where::Lost:
        expect(b.frame < 0 && b.slot < 0 && !b.hashed, id + " is lost but holds something");
        break;
      case Where::Free:
        break;
    }
    if (b.refs == 0) {
      const bool ok = b.where == Where::Flash ? b.lru == InLru::Flash
                                              : b.lru == InLru::Dram || b.lru == InLru::Pinned;
      expect(b.hashed && ok, id + " is unreferenced but not in the right LRU list");
    } else {
      expect(b.lru == InLru::None, id + " is referenced but sits in an LRU list");
    }
    if (b.hashed) {
      n_hashed += 1;
      expect(b.full, id + " is registered but not full");
      expect(index.find(b.hash) == int32_t(i), id + " is not found under its hash");
    }
    if (b.refs > 0 && b.where == Where::Dram && b.full) n_spillable += 1;
    if (b.refs > 0 && b.where == Where::Flash) n_streamed += 1;
    expect(b.stage < 0 || in_step, id + " keeps a staging index outside a step");
  }
  expect(n_free == int64_t(free_ids.size()), "free block ids do not match free blocks");
  expect(n_hashed == int64_t(index.size()),
         "the prefix index holds blocks that are not registered");
  expect(n_spillable == spillable, "spillable gauge is " + std::to_string(spillable) +
                                       ", recount " + std::to_string(n_spillable));
  expect(n_streamed == streamed, "streamed gauge is " + std::to_string(streamed) + ", recount " +
                                     std::to_string(n_streamed));
  expect(streamed <= stage_cap || !flash, "more streamed blocks than staging room");
  for (size_t f = 0; f < frame_users.size(); ++f) {
    expect(frame_users[f] == 1,
           "frame " + std::to_string(f) + " has " + std::to_string(frame_users[f]) + " owners");
  }
  if (flash) {
    int64_t used = 0;
    for (int u : slot_users) {
      expect(u <= 1, "a flash slot has two owners");
      used += u;
    }
    expect(used + flash->free_slots() == flash->n_slots(), "flash slots leak");
  }
  for (const LruList* l : {&lru_dram, &lru_flash, &lru_pinned}) {
    int64_t n = 0;
    int32_t prev = -1;
    for (int32_t id = l->head; id >= 0; id = blocks[size_t(id)].next) {
      expect(blocks[size_t(id)].prev == prev, "LRU back link broken");
      prev = id;
      n += 1;
      expect(n <= int64_t(nb), "LRU list loops");
    }
    expect(prev == l->tail && n == l->count, "LRU list count or tail wrong");
  }
}

}  // namespace tern::kv
