#pragma once
// The embedding cache: projector outputs (an image's embedding rows) keyed by
// what determines them -- the picture (pixel_hash), the projector file and the
// preprocessing settings -- so the same picture sent again, in any encoding or
// by any route, is not encoded twice.
//
// Two tiers, each an LRU under its own byte budget:
//   DRAM   shared_ptr<const Embeddings>: an entry in use by a reader stays
//          alive after eviction (the cache only drops its own reference);
//   flash  optional, a directory with one file per entry, named by the key's
//          digest, written through on insert (temp file + rename). A file has
//          a header and a SHA-256 over header and rows, checked on every
//          load: a damaged or foreign file is deleted and counted, never used.
//          The directory is indexed at start, so entries are found again
//          after DRAM eviction and after a restart.
// A flash write error (disk full, directory gone) turns the flash tier off
// and is counted; the request that caused it is served from DRAM as usual.
//
// Memory budget (optional, core/memory_budget.h): DRAM entries are charged
// to MemPool::MmCache. An entry goes into DRAM only when the budget has room
// for it after the cache evicted its own least recently used entries (they
// stay on flash when the tier is on); otherwise it is handed to the caller
// uncached (counted in `not_kept`). The cache registers itself as the
// budget's reclaimer for MmCache, so KV blocks and admitted requests can make
// it evict. The budget must outlive the cache.
//
// Thread-safe: one mutex guards the indexes; file reads and writes run
// outside it.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tern/core/memory_budget.h"
#include "tern/core/sha256.h"
#include "tern/vision/encoder.h"
#include "tern/vision/vision_config.h"

namespace tern::vision {

struct EmbeddingKey {
  Sha256Digest pixels{};      // pixel_hash(image)
  Sha256Digest projector{};   // projector_fingerprint(mmproj file)
  Sha256Digest preprocess{};  // preprocess_fingerprint(config)

  Sha256Digest digest() const;  // SHA-256 over the three: the cache's key and file name
};

// SHA-256 of a file's bytes (the mmproj file: another file, other outputs).
// Throws IoError.
Sha256Digest projector_fingerprint(const std::string& path);
// SHA-256 over the settings preprocessing depends on (projector type, sizes,
// mean, std, merge factor).
Sha256Digest preprocess_fingerprint(const VisionConfig& c);

struct EmbeddingCacheOptions {
  size_t dram_bytes = size_t(256) << 20;
  std::string flash_dir;                 // "" : no flash tier
  size_t flash_bytes = size_t(1) << 30;  // file bytes kept in flash_dir
  MemoryBudget* budget = nullptr;        // null: dram_bytes is the only limit
};

struct EmbeddingTierStats {
  uint64_t hits = 0;
  uint64_t evictions = 0;
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

struct EmbeddingCacheStats {
  EmbeddingTierStats dram, flash;
  uint64_t misses = 0;
  uint64_t inserts = 0;
  uint64_t flash_dropped = 0;       // damaged or foreign files deleted on load
  uint64_t flash_write_errors = 0;  // writes that failed (then the tier is off)
  uint64_t not_kept = 0;            // entries the memory budget had no room for in DRAM
  uint64_t reclaimed_bytes = 0;     // DRAM bytes evicted because the budget asked
  bool flash_enabled = false;
};

class EmbeddingCache {
 public:
  explicit EmbeddingCache(EmbeddingCacheOptions opts);
  ~EmbeddingCache();
  EmbeddingCache(const EmbeddingCache&) = delete;
  EmbeddingCache& operator=(const EmbeddingCache&) = delete;

  using Entry = std::shared_ptr<const Embeddings>;

  // DRAM first, then flash (a verified flash entry is promoted to DRAM).
  // nullptr on a miss (counted).
  Entry find(const EmbeddingKey& key);
  // Stores rows for `key` (replacing any) and returns them as an entry.
  Entry insert(const EmbeddingKey& key, Embeddings rows);
  // find, or encode() + insert; `hit` says which.
  Entry get_or_encode(const EmbeddingKey& key, const std::function<Embeddings()>& encode,
                      bool* hit = nullptr);

  EmbeddingCacheStats stats() const;
  // Evicts least recently used DRAM entries until `bytes` are freed (or the
  // DRAM tier is empty); returns the bytes freed. Thread-safe.
  size_t evict_dram(size_t bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::vision
