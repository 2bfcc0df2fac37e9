#pragma once
// Configuration, identifiers, errors and counters of the paged KV cache
// (paged_kv.h). Nothing here knows about models' weights or requests: the
// engine fills KvConfig from the model's shape and the command line.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/types.h"

namespace tern {
class MemoryBudget;  // core/memory_budget.h
}

namespace tern::kv {

// How one token's key and value rows (head_dim values per kv head) are stored.
//   F16      keys fp16, values fp16                          (the plain layout)
//   Int8     keys int8, values int8, one fp32 scale per token and head each
//   Int8Fp8  keys int8 + scale, values fp8 e4m3 + scale      (default)
//   Int4Fp8  keys int4 + scale, values fp8 e4m3 + scale      (head_dim must be even;
//            keys are rotated first when head_dim is a power of two, see kv_layout.h)
// Every row quantizes on its own, so appending a token never touches earlier ones.
enum class KvType : uint8_t { F16, Int8, Int8Fp8, Int4Fp8 };
constexpr int kNumKvTypes = 4;

const char* to_string(KvType t);
// "f16", "int8", "int8-fp8" (alias "mixed"), "int4-fp8"; throws InvalidArgument.
KvType parse_kv_type(std::string_view s);

struct KvConfig {
  // Model shape.
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  // Layout and budgets.
  KvType type = KvType::Int8Fp8;
  int block_tokens = 32;                  // tokens per block (1..256); see paged_kv.h for why 32
  int max_seqs = 64;                      // live sequence slots
  int max_seq_tokens = 8192;              // longest sequence (the context)
  size_t dram_bytes = size_t(256) << 20;  // block arena + flash staging, all of it
  // Flash tier: off when flash_dir is empty or flash_bytes is 0.
  std::string flash_dir;     // a folder; default_flash_dir() is the CLI's default
  size_t flash_bytes = 0;    // size budget of the spill file
  int prefetch_layers = 1;   // read layer L+prefetch_layers while layer L computes
  size_t staging_bytes = 0;  // flash read buffers taken from dram_bytes; 0: dram_bytes/16
  // false: attach_prefix() reuses nothing (every prompt is computed in full;
  // for measuring what the prefix cache saves).
  bool prefix_reuse = true;
  // Mixed into every block hash: a fingerprint of the model file (and anything
  // else that changes what KV a token produces).
  std::string model_fingerprint;
  // The process's one memory budget (null: none): every DRAM frame holding a
  // block and the staging buffers are charged to MemPool::Kv; a frame is
  // taken only when the budget has room (after asking the embedding cache to
  // give some back), and free frames are returned to it (and to the OS).
  MemoryBudget* budget = nullptr;
};

// The folder under the system temp directory used when --kv-flash-dir is not given.
std::string default_flash_dir();

// Identity of a full block: SHA-256 over (parent hash, token ids, extra keys).
using BlockHash = std::array<uint8_t, 32>;

// What besides token ids decides a sequence's KV. salt: e.g. a hash of the
// adapter id (mixed into the chain's root). extras: (token position, content
// hash) pairs, e.g. an image's hash at its placeholder tokens; each is mixed
// into the hash of the block holding that position. Sorted by position.
// publish false: the sequence's blocks are never registered in the prefix
// index (an embedding's KV is private: freed whole when it ends, never
// reused, never announced as a stored-block event).
struct SeqKeys {
  BlockHash salt{};
  std::vector<std::pair<int32_t, BlockHash>> extras;
  bool publish = true;
};

// The pool has no room for the blocks asked for, even after evicting cached
// blocks and spilling cold ones: preempt a sequence and retry.
class KvFullError : public Error {
 public:
  using Error::Error;
};

// The flash tier failed (disk full, read or write error). Only the sequences
// that needed the failed I/O are affected.
class KvIoError : public IoError {
 public:
  using IoError::IoError;
};

// Counters and gauges (gauges are "now", counters since construction).
struct KvStats {
  // Sizes.
  int64_t block_tokens = 0;
  int64_t block_bytes = 0;      // one block, all layers
  int64_t bytes_per_token = 0;  // all layers, all kv heads, K and V
  // DRAM (gauges, in blocks).
  int64_t dram_blocks = 0;  // frames in the arena
  int64_t dram_free = 0;    // holding nothing
  int64_t dram_used = 0;    // referenced by a live sequence
  int64_t dram_cached = 0;  // unreferenced prefix-cache blocks (LRU), pinned ones included
  int64_t dram_pinned = 0;  // ... of which pinned by a session (--session-ttl)
  // Flash (gauges, in blocks).
  int64_t flash_blocks = 0;  // slots in the spill file
  int64_t flash_used = 0;    // slots holding a block
  int64_t flash_live = 0;    // referenced blocks that live only on flash (streamed)
  int64_t flash_cached = 0;  // unreferenced prefix-cache blocks only on flash
  // Prefix cache (counters).
  int64_t lookups = 0;     // attach_prefix calls
  int64_t hits_dram = 0;   // blocks reused from DRAM
  int64_t hits_flash = 0;  // blocks reused from flash
  int64_t misses = 0;      // prompt blocks a lookup wanted but did not find (counted like hits_*)
  int64_t tokens_reused_dram = 0;
  int64_t tokens_reused_flash = 0;
  int64_t tokens_computed = 0;  // tokens committed (written by the forward pass)
  // Flash traffic (counters).
  int64_t blocks_spilled = 0;           // live cold blocks written out
  int64_t blocks_evicted_to_flash = 0;  // unreferenced cached blocks written out
  int64_t blocks_dropped = 0;           // cached blocks forgotten (no room anywhere)
  int64_t pinned_evicted = 0;    // session-pinned blocks evicted from DRAM before their pin expired
  int64_t bytes_spilled = 0;     // all bytes written to flash
  int64_t bytes_prefetched = 0;  // per-layer reads for attention
  int64_t bytes_reloaded = 0;    // whole-block reads back into DRAM
  int64_t prefetch_stalls = 0;   // waits that found reads still in flight
  double prefetch_stall_ms = 0.0;
  int64_t write_errors = 0;
  int64_t read_errors = 0;
};

}  // namespace tern::kv
