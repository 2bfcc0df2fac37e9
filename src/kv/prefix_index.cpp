// Open-addressing BlockHash -> block id table (see prefix_index.h).
#include "tern/kv/prefix_index.h"

#include <cstring>

namespace tern::kv {

PrefixIndex::PrefixIndex(size_t max_entries) : max_(max_entries) {
  size_t cap = 16;
  while (cap < 2 * max_entries) cap *= 2;  // load factor <= 1/2 keeps probe runs short
  slots_.resize(cap);
  mask_ = cap - 1;
}

size_t PrefixIndex::home(const BlockHash& key) const {
  uint64_t h;
  std::memcpy(&h, key.data(), 8);
  return size_t(h) & mask_;
}

size_t PrefixIndex::probe(const BlockHash& key) const {
  size_t i = home(key);
  while (slots_[i].id >= 0 && slots_[i].key != key) i = (i + 1) & mask_;
  return i;
}

int32_t PrefixIndex::find(const BlockHash& key) const {
  return slots_[probe(key)].id;
}

bool PrefixIndex::insert(const BlockHash& key, int32_t id) {
  if (size_ >= max_) return false;
  const size_t i = probe(key);
  if (slots_[i].id >= 0) return false;
  slots_[i].key = key;
  slots_[i].id = id;
  ++size_;
  return true;
}

bool PrefixIndex::erase(const BlockHash& key) {
  size_t i = probe(key);
  if (slots_[i].id < 0) return false;
  // Backward shift: pull later members of the run into the hole unless their
  // home lies cyclically in (hole, their slot].
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask_;
    if (slots_[j].id < 0) break;
    const size_t k = home(slots_[j].key);
    const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i].id = -1;
  --size_;
  return true;
}

}  // namespace tern::kv
