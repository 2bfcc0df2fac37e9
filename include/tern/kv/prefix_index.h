#pragma once
// The prefix index: BlockHash -> block id. A fixed-capacity open-addressing
// table (linear probing, backward-shift deletion), so registering a block in
// the decode step never allocates. Keys are SHA-256 outputs, already uniform:
// the slot comes straight from their first 8 bytes.
#include <cstdint>
#include <vector>

#include "tern/kv/kv_types.h"

namespace tern::kv {

class PrefixIndex {
 public:
  explicit PrefixIndex(size_t max_entries);

  int32_t find(const BlockHash& key) const;       // -1 when absent
  bool insert(const BlockHash& key, int32_t id);  // false when present or full
  bool erase(const BlockHash& key);               // false when absent
  size_t size() const { return size_; }
  size_t max_entries() const { return max_; }

 private:
  struct Slot {
    BlockHash key{};
    int32_t id = -1;  // -1: empty
  };
  size_t home(const BlockHash& key) const;
  size_t probe(const BlockHash& key) const;  // the key's slot, or the empty slot ending its run

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t max_ = 0;
};

}  // namespace tern::kv
