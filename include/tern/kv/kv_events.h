#pragma once
// Prefix-cache events for prefix-aware routers (GET /v1/kv/events): a block
// was registered in the prefix index (stored) or left it (removed), named by
// its chain hash (block_hash.h). Modelled on vLLM's KV events (BlockStored,
// BlockRemoved).
//
// PagedKv reports each event on the engine thread to a KvEventSink;
// KvEventLog is the sink the server reads: a fixed ring of the latest events,
// numbered from 1, appended without allocating. A reader that falls more than
// the ring's capacity behind learns how many it lost.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "tern/kv/kv_types.h"

namespace tern::kv {

enum class KvEventKind : uint8_t { Stored, Removed };

struct KvEvent {
  KvEventKind kind = KvEventKind::Stored;
  bool on_flash = false;  // where the block lives now ("dram" or "flash")
  BlockHash hash{};
  BlockHash parent{};               // stored: the previous block's hash, or the chain's root
  std::span<const int32_t> tokens;  // stored: the block's token ids (empty when unknown)
};

class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void on_event(const KvEvent& e) = 0;  // engine thread; must not block long
};

class KvEventLog : public KvEventSink {
 public:
  // capacity events of at most block_tokens token ids each.
  KvEventLog(size_t capacity, int block_tokens);

  struct Entry {
    uint64_t seq = 0;
    double ts = 0.0;  // unix seconds
    KvEventKind kind = KvEventKind::Stored;
    bool on_flash = false;
    BlockHash hash{}, parent{};
    std::vector<int32_t> tokens;
  };

  void on_event(const KvEvent& e) override;
  // Entries with seq > after, oldest first, at most max_n; `lost` gets how
  // many wanted ones the ring has already overwritten.
  std::vector<Entry> read(uint64_t after, size_t max_n, uint64_t* lost) const;
  uint64_t last_seq() const;
  int block_tokens() const { return block_tokens_; }

 private:
  struct Slot {
    uint64_t seq = 0;
    double ts = 0.0;
    KvEventKind kind = KvEventKind::Stored;
    bool on_flash = false;
    int n_tokens = 0;
    BlockHash hash{}, parent{};
  };
  mutable std::mutex mu_;
  std::vector<Slot> ring_;
  std::vector<int32_t> tokens_;  // (capacity, block_tokens)
  int block_tokens_ = 0;
  uint64_t next_ = 1;
};

}  // namespace tern::kv
