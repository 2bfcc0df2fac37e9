#pragma once
// The persistent prefix cache (`tern serve --cache-dir DIR`): the prefix
// cache's registered blocks written to one file so a restarted server finds
// them again.
//
// DIR/prefix-cache.tkv, little-endian:
//   header   "TERNKVC1", u32 version, u32 n, the model fingerprint (n bytes),
//            u8 kv type, 3 zero bytes, i32 n_layers, n_kv_heads, head_dim,
//            block_tokens, u64 block_bytes, u64 n_records,
//            then SHA-256 of all the header bytes before it
//   records  n_records x { block hash (32), SHA-256 of hash + payload (32),
//            payload (block_bytes: the block's layer slices, as in a frame) }
// Records come most recently used first, so a smaller budget keeps the
// hottest blocks. The file is written to a temporary name, synced and renamed
// over the old one: a crash mid-write leaves the previous file intact.
// Loading checks the header's checksum, then the fingerprint and layout (a
// mismatch ignores the file with one log line: another model's KV is never
// used), then each record's checksum: a bad record is dropped and counted, a
// truncated tail ends the load; the server starts either way.
//
// DIR/lock is held with flock() while a server uses DIR: a second server
// pointed at the same DIR refuses to start (CacheDirInUse) rather than
// sharing it read-only.
#include <chrono>
#include <cstdint>
#include <string>

#include "tern/core/error.h"

namespace tern::kv {

class PagedKv;

class CacheDirInUse : public Error {
 public:
  using Error::Error;
};

// Creates DIR if missing and locks it for this process's lifetime (the
// object's). Throws CacheDirInUse naming the holder's pid, or IoError.
class CacheDirLock {
 public:
  explicit CacheDirLock(const std::string& dir);
  ~CacheDirLock();
  CacheDirLock(const CacheDirLock&) = delete;
  CacheDirLock& operator=(const CacheDirLock&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int fd_ = -1;
};

struct PersistStats {
  int64_t blocks = 0;      // written, or loaded into the cache
  int64_t bytes = 0;       // file bytes written or read
  int64_t dropped = 0;     // records whose checksum failed, or cut short
  int64_t no_room = 0;     // valid records the cache had no room for (load)
  bool ignored = false;    // load: the file was for another model / layout, or corrupt
  bool timed_out = false;  // save: the deadline cut the list short
  bool failed = false;     // save: an I/O error (disk full...); the old file is kept
  std::string message;     // what happened, for the log
  double ms = 0.0;
};

std::string cache_file_path(const std::string& dir);

// Writes every registered block (most recently used first) until max_bytes
// of file or the deadline. Engine thread (or no engine thread running).
PersistStats save_prefix_cache(PagedKv& kv, const std::string& dir, size_t max_bytes,
                               std::chrono::steady_clock::time_point deadline);

// Imports DIR's file into kv's prefix cache (nothing when absent).
PersistStats load_prefix_cache(PagedKv& kv, const std::string& dir);

}  // namespace tern::kv
