#pragma once
// Private state of PagedKv, shared by paged_kv.cpp (sequences, prefix cache),
// paged_kv_alloc.cpp (frames, eviction, spilling, loads) and paged_kv_step.cpp
// (forward-pass hooks, attention).
//
// A logical block is in one of these places:
//   Dram     a DRAM frame holds it (and maybe a clean copy on flash: slot >= 0)
//   Loading  a whole-block read from its flash slot into its frame is in flight
//   Flash    only its flash slot holds it; attention streams it through staging
//   Lost     its only copy became unreadable; the sequences using it have failed
// Unreferenced registered blocks sit in an LRU list: lru_dram (Dram/Loading),
// lru_pinned (Dram/Loading, pinned by a session until pin_until: evicted only
// when lru_dram is empty, and moved to lru_dram's cold end when the pin
// expires) or lru_flash (Flash). Everything else unreferenced is freed at once.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mapped_arena.h"
#include "tern/kv/block_hash.h"
#include "tern/kv/flash_store.h"
#include "tern/kv/kv_attend.h"
#include "tern/kv/kv_layout.h"
#include "tern/kv/paged_kv.h"
#include "tern/kv/prefix_index.h"

namespace tern::kv {

int64_t steady_ns();  // steady clock, for pins

enum class Where : uint8_t { Free, Dram, Loading, Flash, Lost };
enum class InLru : uint8_t { None, Dram, Flash, Pinned };

struct Block {
  Where where = Where::Free;
  InLru lru = InLru::None;
  bool full = false;             // every position committed: immutable from now on
  bool hashed = false;           // registered in the prefix index under `hash`
  bool writing = false;          // a write from its frame to its slot is in flight
  int32_t refs = 0;              // sequences whose table holds it
  int32_t frame = -1;            // DRAM frame
  int64_t slot = -1;             // flash slot holding a valid copy
  int32_t prev = -1, next = -1;  // LRU links
  int32_t stage = -1;            // staging index during a step (Flash blocks)
  int32_t io_status = 0;         // result of its last write or load (set by the I/O thread)
  BlockHash hash{};
  int64_t pin_until = 0;  // steady-clock ns; a session keeps it in DRAM until then
};

struct LruList {
  int32_t head = -1;  // least recently used
  int32_t tail = -1;
  int64_t count = 0;
};

struct Seq {
  bool live = false;
  int length = 0;              // committed tokens
  std::vector<int32_t> table;  // block ids by position / block_tokens
  std::vector<int32_t> tail;   // token ids of the partial last block
  BlockHash chain{};           // hash of the last full block (the root before any)
  SeqKeys keys;
  size_t next_extra = 0;  // first extra key not folded into a block hash yet
  std::string error;      // non-empty: failed
};

struct PagedKvImpl {
  explicit PagedKvImpl(const KvConfig& cfg);
  ~PagedKvImpl();  // gives its charges back to the memory budget

  // paged_kv.cpp
  Seq& seq(SeqId id);
  const Seq& seq(SeqId id) const;
  SeqId create(const SeqKeys& keys);
  void release(SeqId id, double pin_seconds);
  int attach_prefix(SeqId id, std::span<const int32_t> prompt);
  void commit(SeqId id, std::span<const int32_t> tokens);
  BlockHash hash_block(Seq& s, int first_pos, std::span<const int32_t> tokens, size_t& cursor);
  KvStats stats() const;
  void check_invariants() const;

  // paged_kv_alloc.cpp
  int64_t available_blocks() const;
  void reserve(SeqId id, int n_new);
  // Into scratch_frames; throws when short. cached_only: only from evicting
  // unreferenced cached blocks (to flash when it can), never free frames or
  // live sequences' blocks.
  void obtain_frames(int64_t need, bool cached_only = false);
  // Frames and the memory budget (cfg.budget): every frame outside
  // free_frames is charged to it.
  int32_t take_free_frame(bool reclaim = true);  // -1: none free, or no room in the budget
  int32_t take_free_frame_forced();              // one is free; charged even past the budget
  void give_frame(int32_t frame);                // back to free_frames, the budget and the OS
  int64_t usable_free_frames() const;            // free frames the budget lets us take now
  // The budget's reclaimer: evicts unreferenced cached blocks (flash first)
  // until about `bytes` are given back; returns the bytes given back.
  size_t give_back(size_t bytes);
  int64_t take_slot();  // frees the LRU flash-only block when none is free
  int32_t pick_spill_victim();
  int32_t take_frame_cheap();  // a free frame, or one from a clean LRU block; -1
  void start_load(int32_t id, int32_t frame);
  void start_write(int32_t id);  // every layer of the block's frame to its slot
  void reap_loads();             // waits for loads in flight and settles them
  void ref(int32_t id);
  void unref(int32_t id);
  void free_block(int32_t id);
  int32_t new_block();
  void lose_block(int32_t id, const std::string& why);  // marks users failed
  void lru_push(int32_t id, InLru which);
  void lru_remove(int32_t id);
  LruList& lru_list(InLru which) {
    return which == InLru::Dram ? lru_dram : which == InLru::Pinned ? lru_pinned : lru_flash;
  }
  void expire_pins();  // expired pins move to lru_dram's cold end
  void uncount(const Block& b);
  void count(const Block& b);
  uint8_t* frame_ptr(int32_t frame) { return arena.data() + size_t(frame) * L.block_bytes; }
  const uint8_t* frame_ptr(int32_t frame) const {
    return arena.data() + size_t(frame) * L.block_bytes;
  }
  void wait_timed(IoGroup& g);  // flash->wait, counting a stall when it blocks

  // paged_kv_persist.cpp
  int64_t export_cached(const PagedKv::BlockVisitor& fn);
  bool import_cached(const BlockHash& hash, std::span<const uint8_t> bytes);
  void lru_push_front(int32_t id, InLru which);

  // paged_kv_step.cpp
  void begin_step(std::span<const SeqId> seqs);
  void begin_layer(int layer);
  void end_step();
  void suspend_step();
  void resume_step();
  void issue_layer(int layer);
  void write(SeqId id, int layer, int pos, const float* k, const float* v);
  void attend(SeqId id, int layer, int kvh, int pos0, int n_tok, int group, const float* q,
              int64_t q_stride, float* out, int64_t out_stride, int window, int horizon) const;
  void attend_tiled(AttendTileFn tile, const Seq& s, int layer, int kvh, int pos0, int n_tok,
                    int group, const float* q, int64_t q_stride, float* out, int64_t out_stride,
                    int horizon) const;
  void attend_segment(SeqId id, int layer, int kvh, int pos0, int n_tok, int group, const float* q,
                      int64_t q_stride, int segment, float* m, float* l, float* acc) const;
  // Rows' softmax states over blocks [b0, b1), from scratch.
  void tile_blocks(AttendTileFn tile, const Seq& s, int layer, int kvh, int b0, int b1, int nr,
                   const int* ctx, const float* const* q, float* m, float* l, float* acc) const;
  // Split-K segments: 512 positions (whole blocks).
  int segment_blocks() const { return std::max(1, 512 / L.block_tokens); }
  const uint8_t* slice_ptr(const Block& b, int layer) const;
  // Starts reading block blk's head kvh of `layer` into L2 (the next tile's).
  void prefetch_next(const Seq& s, int blk, int layer, int kvh) const;

  KvConfig cfg;
  KvLayout L;
  const AttendKernels* kern;

  // DRAM.
  int64_t n_frames = 0;
  MappedArena arena;  // (n_frames, block_bytes)
  std::vector<int32_t> free_frames;
  size_t staging_charged = 0;  // staging bytes charged to cfg.budget
  std::vector<Block> blocks;   // n_frames + flash slots
  std::vector<int32_t> free_ids;
  LruList lru_dram, lru_flash, lru_pinned;
  PrefixIndex index;
  BlockHasher hasher;
  std::vector<Seq> seqs;
  // Gauges kept in step with every block change (see count()).
  int64_t spillable = 0;  // Dram, full, referenced, not being written
  int64_t streamed = 0;   // Flash, referenced

  // Flash tier (`flash` is null when off; it is the last member, so it is
  // destroyed first and waits out any I/O into the buffers above).
  int sets = 1;                    // layers in flight: prefetch_layers + 1
  int64_t stage_cap = 0;           // streamed blocks per layer
  MappedArena staging;             // (sets, stage_cap, slice_bytes)
  std::vector<int32_t> plan;       // blocks streamed this step, by stage index
  std::vector<int64_t> plan_slot;  // their flash slots (fixed for the step)
  std::vector<int32_t> plan_run;   // at the start of a run of consecutive slots: its length; else 0
  std::vector<int32_t> plan_status;  // (sets, stage_cap) read results, at run starts
  std::vector<IoGroup> layer_io;     // per set
  IoGroup load_io, write_io;
  std::vector<int32_t> loading;  // blocks with a load in flight
  std::vector<int32_t> scratch_frames, scratch_victims;
  std::vector<std::pair<int32_t, BlockHash>> scratch_extras;

  // Step state.
  bool in_step = false;
  int next_layer = 0;
  std::vector<SeqId> step_seqs;
  // A step suspended between layers (suspend_step): its layer to resume
  // at and its sequences; no live block is spilled meanwhile.
  bool suspended = false;
  int suspended_layer = 0;
  std::vector<SeqId> suspended_seqs;

  KvStats st;
  KvEventSink* events = nullptr;  // prefix-index events (kv_events.h)
  void emit_removed(const Block& b) {
    if (events && b.hashed)
      events->on_event({KvEventKind::Removed, b.where == Where::Flash, b.hash, {}, {}});
  }
  std::unique_ptr<FlashStore> flash;
};

}  // namespace tern::kv
