// PagedKv: handing registered blocks out to a persistent store and taking
// them back in (kv_persist.h drives both).
#include <cstring>
#include <vector>

#include "paged_kv_impl.h"

namespace tern::kv {

void PagedKvImpl::lru_push_front(int32_t id, InLru which) {
  LruList& l = lru_list(which);
  Block& b = blocks[size_t(id)];
  b.lru = which;
  b.prev = -1;
  b.next = l.head;
  (l.head >= 0 ? blocks[size_t(l.head)].prev : l.tail) = id;
  l.head = id;
  l.count += 1;
}

int64_t PagedKvImpl::export_cached(const PagedKv::BlockVisitor& fn) {
  if (in_step) throw InvalidArgument("KV: export_cached() during a forward step");
  reap_loads();  // a Loading block's frame is not complete yet
  if (flash) flash->wait(write_io);
  // Most recently used first: live sequences' blocks, then each LRU list from its tail.
  std::vector<int32_t> order;
  order.reserve(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    if (b.refs > 0 && b.hashed && b.full) order.push_back(int32_t(i));
  }
  for (int32_t id = lru_pinned.tail; id >= 0; id = blocks[size_t(id)].prev) order.push_back(id);
  for (int32_t id = lru_dram.tail; id >= 0; id = blocks[size_t(id)].prev) order.push_back(id);
  for (int32_t id = lru_flash.tail; id >= 0; id = blocks[size_t(id)].prev) order.push_back(id);

  std::vector<uint8_t> buf;
  int64_t visited = 0;
  for (int32_t id : order) {
    const Block& b = blocks[size_t(id)];
    if (!b.hashed || !b.full) continue;
    std::span<const uint8_t> bytes;
    if (b.where == Where::Dram) {
      bytes = {frame_ptr(b.frame), L.block_bytes};
    } else if (b.where == Where::Flash && b.slot >= 0) {
      buf.resize(L.block_bytes);
      IoGroup g;
      int32_t status = 0;
      for (int l = 0; l < L.n_layers; ++l)
        flash->read(b.slot, l, 1, buf.data() + size_t(l) * L.slice_bytes, g, &status);
      flash->submit();
      flash->wait(g);
      if (status != 0) {
        st.read_errors += 1;
        return -1;
      }
      bytes = {buf.data(), buf.size()};
    } else {
      continue;
    }
    visited += 1;
    if (!fn(b.hash, bytes)) break;
  }
  return visited;
}

bool PagedKvImpl::import_cached(const BlockHash& hash, std::span<const uint8_t> bytes) {
  if (in_step) throw InvalidArgument("KV: import_cached() during a forward step");
  if (bytes.size() != L.block_bytes)
    throw InvalidArgument("KV: import_cached() of a block of the wrong size");
  if (index.find(hash) >= 0 || free_ids.empty()) return false;
  int64_t slot = flash ? flash->alloc_slot() : -1;
  if (slot >= 0) {
    IoGroup g;
    int32_t status = 0;
    for (int l = 0; l < L.n_layers; ++l)
      flash->write(slot, l, bytes.data() + size_t(l) * L.slice_bytes, g, &status);
    flash->submit();
    flash->wait(g);
    if (status != 0) {  // a full or failing disk: DRAM may still take it
      flash->free_slot(slot);
      slot = -1;
      st.write_errors += 1;
    }
  }
  const int32_t frame = slot < 0 ? take_free_frame() : -1;
  if (slot < 0 && frame < 0) return false;
  const int32_t id = new_block();
  Block& b = blocks[size_t(id)];
  b.full = true;
  b.hashed = true;
  b.hash = hash;
  if (slot >= 0) {
    b.where = Where::Flash;
    b.slot = slot;
    st.bytes_spilled += int64_t(L.block_bytes);
  } else {
    b.where = Where::Dram;
    b.frame = frame;
    std::memcpy(frame_ptr(b.frame), bytes.data(), L.block_bytes);
  }
  index.insert(hash, id);
  if (events) events->on_event({KvEventKind::Stored, b.where == Where::Flash, hash, {}, {}});
  lru_push_front(id, b.where == Where::Flash ? InLru::Flash : InLru::Dram);
  return true;
}

int64_t PagedKv::export_cached(const BlockVisitor& fn) {
  return impl_->export_cached(fn);
}
bool PagedKv::import_cached(const BlockHash& hash, std::span<const uint8_t> bytes) {
  return impl_->import_cached(hash, bytes);
}

}  // namespace tern::kv
