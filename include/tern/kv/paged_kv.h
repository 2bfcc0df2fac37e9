#pragma once
// The paged, quantized KV cache with automatic prefix caching and a
// DRAM-flash hybrid tier. It knows the model's shape only (KvConfig), never
// its weights or the requests.
//
// Memory. Sequences own ordered tables of fixed-size blocks (block_tokens
// positions, every layer; kv_layout.h). Blocks live in one DRAM arena of
// dram_bytes; nothing is preallocated per sequence. Why 32 tokens a block:
// one layer's slice of a block is then ~13 KB for the default model
// (30 layers, 3 kv heads x 64, int8-fp8), a good size for a flash read and
// for streaming in attention, while a sequence wastes at most 31 positions and
// the prefix cache matches at a 32-token granularity (16 would halve both but
// double per-block overheads; 64 would lose up to 63 tokens of every reuse).
//
// Prefix cache. When a block fills, it is named by a chained SHA-256
// (block_hash.h) and registered. attach_prefix() reuses the longest chain of
// registered blocks matching a new prompt; blocks are reference-counted, and
// unreferenced ones stay cached, evicted least recently used first. Only
// committed, full blocks of healthy sequences are ever registered or shared,
// so a sequence sees only KV computed from exactly its own prefix.
//
// Flash. When DRAM runs out, evicted cached blocks are written to the spill
// file instead of dropped (and found again by hash), and cold full blocks of
// live sequences (the oldest positions of the longest one) are spilled and
// then streamed layer by layer into staging buffers during attention, read
// prefetch_layers ahead on the libuv thread (one read per layer for each run
// of consecutive spill slots). Streamed blocks move back into DRAM between
// steps once frames are free. Written blocks keep their format. Staging
// (staging_bytes, default dram_bytes/16) bounds how many blocks of live
// sequences may be streamed; past that, reserve() throws KvFullError.
//
// Keys of int4-fp8 are stored rotated by a fixed orthogonal transform
// (kv_layout.h, rotate()); write() and attend() apply it, callers never see it.
//
// Threads. Everything runs on the engine thread, except attend(), which the
// forward pass may call concurrently from task-pool workers between
// begin_layer() and the next begin_layer()/end_step().
//
// One forward step, for the sequences S of the batch:
//   for s in S: reserve(s, n_new(s))             // before the step; may throw
//   begin_step(S)
//   for each layer l:
//     begin_layer(l)                             // waits for layer l's flash reads
//     for each new token: write(s, l, pos, k, v)
//     attend(...) per (sequence, kv head)        // in parallel
//   end_step()
//   for s in S: commit(s, tokens(s))
//   for s in S: if (!failure(s).empty()) fail that request only
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "tern/kv/flash_store.h"
#include "tern/kv/kv_attend.h"
#include "tern/kv/kv_events.h"
#include "tern/kv/kv_layout.h"
#include "tern/kv/kv_types.h"

namespace tern::kv {

struct PagedKvImpl;

class PagedKv {
 public:
  // Validates the config; creates the flash folder and spill file when the
  // flash tier is on. Throws InvalidArgument (bad shape, budget smaller than
  // a block) or KvIoError (folder or file cannot be created).
  explicit PagedKv(const KvConfig& cfg);
  ~PagedKv();  // removes the spill file
  PagedKv(const PagedKv&) = delete;
  PagedKv& operator=(const PagedKv&) = delete;

  const KvConfig& config() const;
  const KvLayout& layout() const;
  size_t bytes_per_token() const { return layout().bytes_per_token(); }
  int block_tokens() const { return layout().block_tokens; }

  // --- Sequences --------------------------------------------------------
  SeqId create(const SeqKeys& keys = {});  // throws KvFullError when every slot is live
  // Full registered blocks stay cached; the rest are freed. With pin_seconds
  // > 0 (a session's last turn) its cached blocks are pinned in DRAM that
  // long: evicted only after every unpinned cached block, oldest pin first,
  // and written to flash (when the tier is on) rather than dropped.
  void release(SeqId seq, double pin_seconds = 0);
  int length(SeqId seq) const;  // committed tokens
  int free_seq_slots() const;

  // Reuses cached blocks for the start of `prompt` (seq must be empty):
  // returns the tokens reused, a multiple of block_tokens and always less
  // than prompt.size(), so the last prompt token is computed and yields
  // logits. Blocks found only on flash are reloaded asynchronously (or
  // streamed when DRAM has no free room).
  int attach_prefix(SeqId seq, std::span<const int32_t> prompt);

  // --- Capacity ---------------------------------------------------------
  int64_t blocks_needed(SeqId seq, int n_new) const;  // new blocks reserve() would take
  int64_t available_blocks() const;                   // free + evictable + spillable, now
  // The most blocks one sequence alone can hold: every DRAM frame, plus the
  // blocks it may stream from flash (bounded by the staging buffers).
  int64_t max_sequence_blocks() const;
  bool can_append(SeqId seq, int n_new) const {
    return blocks_needed(seq, n_new) <= available_blocks();
  }
  // Makes room for positions [length, length + n_new). May evict cached
  // blocks (LRU) and spill cold ones. Throws InvalidArgument past
  // max_seq_tokens, KvFullError when no room can be made (preempt and
  // retry), KvIoError when the flash tier failed or seq has failed.
  void reserve(SeqId seq, int n_new);

  // --- Forward-pass hooks -----------------------------------------------
  void begin_step(std::span<const SeqId> seqs);
  void begin_layer(int layer);  // layers in order 0 .. n_layers-1
  void end_step();
  // A step paused between layers so that another step can run first (the
  // scheduler's yield to a newly arrived short prompt). Only a step that
  // streams nothing from flash can be suspended (can_suspend()): every block
  // it reads stays where it is. While suspended, reserve() and the other
  // between-step calls work for other sequences, but no block of a live
  // sequence is spilled to flash (the suspended step reads them in place);
  // cached blocks are still evicted. resume_step() reopens the step at the
  // layer after the last one begun.
  bool can_suspend() const;
  void suspend_step();
  void resume_step();
  bool suspended() const;
  // Encodes one token's K and V (kv_dim = n_kv_heads * head_dim floats each,
  // head-major) at pos, which must lie in [length, reserved).
  void write(SeqId seq, int layer, int pos, const float* k, const float* v);
  // GQA attention for kv head kvh over rows (token t, query head g) for
  // t < n_tok, g < group: q row at q + t*q_stride + g*head_dim (pre-scaled by
  // 1/sqrt(head_dim)); token t sits at position pos0 + t and attends
  // [0, pos0 + t + 1), or with window > 0 only the last `window` of them
  // (sliding-window layers: [max(0, pos0 + t + 1 - window), pos0 + t + 1));
  // with horizon > 0 every token attends [0, horizon) instead (an encoder's
  // bidirectional attention), and with a window as well the symmetric
  // [max(0, p + 1 - window), min(horizon, p + window)) for the token at p
  // (EmbeddingGemma's local layers);
  // its output goes to out + t*out_stride + g*head_dim.
  // (kernels::attention_f16's n_kv0 is pos0 + 1.) Positions must have been
  // written. A failed sequence gets zeros. Allocates nothing.
  void attend(SeqId seq, int layer, int kvh, int pos0, int n_tok, int group, const float* q,
              int64_t q_stride, float* out, int64_t out_stride, int window = 0,
              int horizon = 0) const;
  // Split-K: the context is cut into segments of attend_segment_tokens()
  // positions; attend() computes each segment's softmax state and merges
  // them in order (attend_merge). attend_segment() computes one segment's
  // state alone (rows as for attend(), at most kMaxTileRows of them; m, l:
  // one per row, acc: head_dim per row), so a long context's decode can
  // spread its segments over workers and merge them in the same order, with
  // bit-identical results. Available when can_split() (the tile kernels).
  bool can_split() const;
  int attend_segment_tokens() const;
  void attend_segment(SeqId seq, int layer, int kvh, int pos0, int n_tok, int group, const float* q,
                      int64_t q_stride, int segment, float* m, float* l, float* acc) const;
  // One token attending [0, n_ctx): n_q query heads, rows of head_dim, contiguous.
  void attend(SeqId seq, int layer, int kvh, int n_ctx, const float* q, int n_q, float* out) const {
    attend(seq, layer, kvh, n_ctx - 1, 1, n_q, q, 0, out, 0);
  }
  // Advances the length over tokens written at [length, length + n) and
  // registers the blocks that became full (unless the sequence has failed).
  void commit(SeqId seq, std::span<const int32_t> tokens);

  // Non-empty when a flash read this sequence depended on failed: its KV is
  // incomplete; finish the request with this message (or recompute it).
  const std::string& failure(SeqId seq) const;

  // --- Persistence (kv_persist.h) ----------------------------------------
  // Both run on the engine thread, outside a step.
  // Calls fn(hash, block bytes) for every registered block, most recently
  // used first (blocks of live sequences, then DRAM-cached, then flash-only);
  // flash-only blocks are read back synchronously. fn returns false to stop.
  // Returns the blocks visited, or -1 when a flash read failed (the blocks
  // before it were visited).
  using BlockVisitor = std::function<bool(const BlockHash& hash, std::span<const uint8_t> bytes)>;
  int64_t export_cached(const BlockVisitor& fn);
  // Registers one block (layout().block_bytes) under hash as an unreferenced
  // cached block, less recently used than every block imported before it.
  // Goes to a flash slot when the flash tier has one free, else to a free
  // DRAM frame. Returns false when the hash is present or there is no room.
  bool import_cached(const BlockHash& hash, std::span<const uint8_t> bytes);

  // --- Observability and tests ------------------------------------------
  // Prefix-index events (kv_events.h) go to sink (null: none); it must
  // outlive the cache or be reset first.
  void set_event_sink(KvEventSink* sink);
  KvStats stats() const;
  const char* kernel_isa() const;
  // Test hook: run attention with these kernels (default: active_attend_kernels()).
  void set_kernels(const AttendKernels& k);
  // Test hook: make flash I/O fail (no-op without a flash tier).
  void inject_flash_fault(IoKind kind, int count, int err, int after = 0);
  // Recounts every reference, frame, slot and list; throws std::logic_error
  // naming the first inconsistency.
  void check_invariants() const;

 private:
  std::unique_ptr<PagedKvImpl> impl_;
};

}  // namespace tern::kv
