// PagedKv: construction, sequences, the prefix cache (attach, commit), stats.
#include "tern/kv/paged_kv.h"

#include <algorithm>
#include <stdexcept>

#include "paged_kv_impl.h"
#include "tern/core/log.h"
#include "tern/core/memory_budget.h"

namespace tern::kv {
namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = log::get("kv");
  return l;
}

std::string mib(size_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

}  // namespace

PagedKvImpl::PagedKvImpl(const KvConfig& c)
    : cfg(c),
      L(KvLayout::make(c.n_layers, c.n_kv_heads, c.head_dim, c.block_tokens, c.type)),
      kern(&active_attend_kernels()),
      index(0) {
  if (c.max_seqs < 1) throw InvalidArgument("KV: max_seqs must be at least 1");
  if (c.max_seq_tokens < 1) throw InvalidArgument("KV: max_seq_tokens must be at least 1");
  if (c.prefetch_layers < 0) throw InvalidArgument("KV: prefetch_layers must be >= 0");
  const bool flash_on = !c.flash_dir.empty() && c.flash_bytes > 0;
  size_t staging_bytes = 0;
  if (flash_on) {
    sets = std::min(c.prefetch_layers + 1, c.n_layers);
    staging_bytes = c.staging_bytes ? c.staging_bytes : c.dram_bytes / 16;
    stage_cap = std::max<int64_t>(1, int64_t(staging_bytes / (size_t(sets) * L.slice_bytes)));
    staging_bytes = size_t(stage_cap) * size_t(sets) * L.slice_bytes;
  }
  if (c.dram_bytes < staging_bytes + L.block_bytes) {
    throw InvalidArgument("KV: a DRAM budget of " + std::to_string(c.dram_bytes >> 10) +
                          " KiB holds no block (one block is " +
                          std::to_string(L.block_bytes >> 10) + " KiB, flash staging " +
                          std::to_string(staging_bytes >> 10) + " KiB)");
  }
  n_frames = int64_t((c.dram_bytes - staging_bytes) / L.block_bytes);
  const int64_t n_slots = flash_on ? int64_t(c.flash_bytes / L.block_bytes) : 0;
  if (flash_on && n_slots < 1) {
    throw InvalidArgument("KV: a flash budget of " + std::to_string(c.flash_bytes >> 10) +
                          " KiB holds no block of " + std::to_string(L.block_bytes >> 10) + " KiB");
  }
  arena = MappedArena(size_t(n_frames) * L.block_bytes);
  free_frames.reserve(size_t(n_frames));
  for (int64_t f = n_frames - 1; f >= 0; --f) free_frames.push_back(int32_t(f));
  // Every block holds a frame or a slot, except lost ones (kept until their
  // sequences release them): a few spare records cover those.
  blocks.resize(size_t(n_frames + n_slots + c.max_seqs));
  free_ids.reserve(blocks.size());
  for (int64_t i = int64_t(blocks.size()) - 1; i >= 0; --i) free_ids.push_back(int32_t(i));
  index = PrefixIndex(blocks.size());
  seqs.resize(size_t(c.max_seqs));
  const size_t max_blocks = size_t((c.max_seq_tokens + L.block_tokens - 1) / L.block_tokens);
  for (Seq& s : seqs) {
    s.table.reserve(max_blocks);
    s.tail.reserve(size_t(L.block_tokens));
  }
  scratch_frames.reserve(size_t(n_frames));
  scratch_victims.reserve(size_t(n_frames));
  scratch_extras.reserve(size_t(2 * L.block_tokens));
  step_seqs.reserve(size_t(c.max_seqs));
  loading.reserve(size_t(n_frames));
  if (flash_on) {
    flash = std::make_unique<FlashStore>(
        FlashStore::Options{c.flash_dir, L.slice_bytes, L.n_layers, n_slots, {}});
    staging = MappedArena(staging_bytes);
    plan.reserve(size_t(stage_cap));
    plan_slot.resize(size_t(stage_cap));
    plan_run.resize(size_t(stage_cap));
    plan_status.assign(size_t(sets * stage_cap), 0);
    layer_io = std::vector<IoGroup>(size_t(sets));
  }
  if (c.budget && staging_bytes > 0) {  // the staging buffers are DRAM the KV holds
    staging_charged = staging_bytes;
    c.budget->force_charge(MemPool::Kv, staging_bytes);
  }
  st.block_tokens = L.block_tokens;
  st.block_bytes = int64_t(L.block_bytes);
  st.bytes_per_token = int64_t(L.bytes_per_token());
  logger()->info("KV cache: {}, {}-token blocks of {} KiB ({} B/token), {} blocks in {} DRAM{}",
                 to_string(c.type), L.block_tokens, L.block_bytes >> 10, L.bytes_per_token(),
                 n_frames, mib(size_t(n_frames) * L.block_bytes),
                 flash ? ", " + std::to_string(n_slots) + " on flash at " + flash->path() +
                             ", staging " + std::to_string(stage_cap) + " blocks x " +
                             std::to_string(sets) + " layers"
                       : std::string());
}

Seq& PagedKvImpl::seq(SeqId id) {
  if (id < 0 || size_t(id) >= seqs.size() || !seqs[size_t(id)].live) {
    throw InvalidArgument("unknown KV sequence " + std::to_string(id));
  }
  return seqs[size_t(id)];
}
const Seq& PagedKvImpl::seq(SeqId id) const {
  return const_cast<PagedKvImpl*>(this)->seq(id);
}

SeqId PagedKvImpl::create(const SeqKeys& keys) {
  for (size_t i = 1; i < keys.extras.size(); ++i) {
    if (keys.extras[i].first < keys.extras[i - 1].first) {
      throw InvalidArgument("KV: extra keys must be sorted by position");
    }
  }
  if (!keys.extras.empty() && keys.extras.front().first < 0) {
    throw InvalidArgument("KV: extra key at a negative position");
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = seqs[i];
    if (s.live) continue;
    s.live = true;
    s.length = 0;
    s.table.clear();
    s.tail.clear();
    s.keys = keys;
    s.next_extra = 0;
    s.error.clear();
    s.chain = hasher.root(cfg.model_fingerprint, cfg.type, L.block_tokens, keys.salt);
    return SeqId(i);
  }
  throw KvFullError("KV cache: all " + std::to_string(seqs.size()) + " sequence slots are in use");
}

void PagedKvImpl::release(SeqId id, double pin_seconds) {
  Seq& s = seq(id);
  if (in_step) throw InvalidArgument("KV: release() during a forward step");
  if (pin_seconds > 0 && s.error.empty()) {
    const int64_t until = steady_ns() + int64_t(pin_seconds * 1e9);
    for (int32_t bid : s.table) {
      Block& b = blocks[size_t(bid)];
      if (b.hashed) b.pin_until = std::max(b.pin_until, until);
    }
  }
  // Last block first: it becomes the least recently used, so eviction eats a
  // cached chain from its tail and the shared beginnings stay reusable longest.
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) unref(*it);
  s.table.clear();
  s.tail.clear();
  s.keys = {};
  s.error.clear();
  s.live = false;
}

// Hash of the block holding [first_pos, first_pos + tokens.size()), chained
// from s.chain, with the extra keys from cursor on that fall inside it.
BlockHash PagedKvImpl::hash_block(Seq& s, int first_pos, std::span<const int32_t> tokens,
                                  size_t& cursor) {
  scratch_extras.clear();
  const auto& ex = s.keys.extras;
  const int end = first_pos + int(tokens.size());
  while (cursor < ex.size() && ex[cursor].first < end) {
    if (ex[cursor].first >= first_pos)
      scratch_extras.emplace_back(ex[cursor].first - first_pos, ex[cursor].second);
    ++cursor;
  }
  return hasher.chain(s.chain, tokens, scratch_extras);
}

int PagedKvImpl::attach_prefix(SeqId id, std::span<const int32_t> prompt) {
  Seq& s = seq(id);
  if (in_step) throw InvalidArgument("KV: attach_prefix() during a forward step");
  if (s.length != 0 || !s.table.empty())
    throw InvalidArgument("KV: attach_prefix() needs an empty sequence");
  st.lookups += 1;
  const int B = L.block_tokens;
  const int64_t want =
      prompt.empty() || !cfg.prefix_reuse
          ? 0
          : std::min<int64_t>((int64_t(prompt.size()) - 1) / B, cfg.max_seq_tokens / B);
  int64_t found = 0, from_flash = 0;
  for (; found < want; ++found) {
    size_t cursor = s.next_extra;
    const BlockHash h =
        hash_block(s, int(found) * B, prompt.subspan(size_t(found) * B, size_t(B)), cursor);
    const int32_t bid = index.find(h);
    if (bid < 0) break;
    Block& b = blocks[size_t(bid)];
    if (b.where == Where::Flash) {
      if (b.refs == 0) {
        // Cached on flash only: reload into DRAM if a frame is free (or held
        // by a clean cached block), else stream it if staging has room.
        const int32_t frame = take_frame_cheap();
        if (frame >= 0) {
          start_load(bid, frame);
        } else if (streamed >= stage_cap) {
          break;
        }
      }
      from_flash += 1;
    } else if (b.where == Where::Loading) {
      from_flash += 1;
    }
    ref(bid);
    s.table.push_back(bid);
    s.chain = h;
    s.next_extra = cursor;
  }
  if (flash) flash->submit();
  s.length = int(found) * B;
  st.hits_dram += found - from_flash;
  st.hits_flash += from_flash;
  st.misses += want - found;
  st.tokens_reused_dram += (found - from_flash) * B;
  st.tokens_reused_flash += from_flash * B;
  return s.length;
}

void PagedKvImpl::commit(SeqId id, std::span<const int32_t> tokens) {
  Seq& s = seq(id);
  if (in_step) throw InvalidArgument("KV: commit() during a forward step");
  const int B = L.block_tokens;
  if (int64_t(s.length) + int64_t(tokens.size()) > int64_t(s.table.size()) * B) {
    throw InvalidArgument("KV: commit() of " + std::to_string(tokens.size()) +
                          " tokens past the reserved room of sequence " + std::to_string(id));
  }
  for (int32_t tok : tokens) {
    s.tail.push_back(tok);
    s.length += 1;
    if (int(s.tail.size()) < B) continue;
    const int32_t bid = s.table[size_t(s.length / B - 1)];
    Block& b = blocks[size_t(bid)];
    uncount(b);
    b.full = true;
    count(b);
    size_t cursor = s.next_extra;
    const BlockHash h = hash_block(s, s.length - B, s.tail, cursor);
    // A failed sequence's KV is incomplete: never share what it computed;
    // a private one (SeqKeys::publish) is never shared either.
    if (s.error.empty() && s.keys.publish && index.insert(h, bid)) {
      b.hashed = true;
      b.hash = h;
      if (events) events->on_event({KvEventKind::Stored, false, h, s.chain, s.tail});
    }
    s.next_extra = cursor;
    s.chain = h;
    s.tail.clear();
  }
  st.tokens_computed += int64_t(tokens.size());
}

KvStats PagedKvImpl::stats() const {
  KvStats r = st;
  r.dram_blocks = n_frames;
  r.dram_free = int64_t(free_frames.size());
  r.dram_cached = lru_dram.count + lru_pinned.count;
  r.dram_pinned = lru_pinned.count;
  r.dram_used = n_frames - r.dram_free - r.dram_cached;
  if (flash) {
    r.flash_blocks = flash->n_slots();
    r.flash_used = flash->n_slots() - flash->free_slots();
    r.flash_live = streamed;
    r.flash_cached = lru_flash.count;
  }
  return r;
}

// --- PagedKv: the public face -------------------------------------------

PagedKvImpl::~PagedKvImpl() {
  if (!cfg.budget) return;
  cfg.budget->uncharge(
      MemPool::Kv,
      staging_charged + size_t(n_frames - int64_t(free_frames.size())) * L.block_bytes);
}

PagedKv::PagedKv(const KvConfig& cfg) : impl_(std::make_unique<PagedKvImpl>(cfg)) {
  // The embedding side may ask for cached blocks back (engine thread only:
  // see memory_budget.h).
  if (cfg.budget)
    cfg.budget->set_reclaimer(MemPool::Kv,
                              [impl = impl_.get()](size_t want) { return impl->give_back(want); });
}
PagedKv::~PagedKv() {
  if (impl_ && impl_->cfg.budget) impl_->cfg.budget->set_reclaimer(MemPool::Kv, {});
  if (impl_ && impl_->in_step) impl_->end_step();
}

const KvConfig& PagedKv::config() const {
  return impl_->cfg;
}
const KvLayout& PagedKv::layout() const {
  return impl_->L;
}
SeqId PagedKv::create(const SeqKeys& keys) {
  return impl_->create(keys);
}
void PagedKv::release(SeqId seq, double pin_seconds) {
  impl_->release(seq, pin_seconds);
}
int PagedKv::length(SeqId seq) const {
  return impl_->seq(seq).length;
}
int PagedKv::free_seq_slots() const {
  return int(
      std::count_if(impl_->seqs.begin(), impl_->seqs.end(), [](const Seq& s) { return !s.live; }));
}
int PagedKv::attach_prefix(SeqId seq, std::span<const int32_t> prompt) {
  return impl_->attach_prefix(seq, prompt);
}
int64_t PagedKv::blocks_needed(SeqId seq, int n_new) const {
  const Seq& s = impl_->seq(seq);
  const int64_t B = impl_->L.block_tokens;
  return std::max<int64_t>(0, (int64_t(s.length) + n_new + B - 1) / B - int64_t(s.table.size()));
}
int64_t PagedKv::available_blocks() const {
  return impl_->available_blocks();
}
int64_t PagedKv::max_sequence_blocks() const {
  const PagedKvImpl& k = *impl_;
  int64_t n = k.stats().dram_blocks;
  if (k.flash) n += std::min<int64_t>(k.stage_cap, k.flash->n_slots());
  return n;
}
void PagedKv::reserve(SeqId seq, int n_new) {
  impl_->reserve(seq, n_new);
}
void PagedKv::begin_step(std::span<const SeqId> seqs) {
  impl_->begin_step(seqs);
}
void PagedKv::begin_layer(int layer) {
  impl_->begin_layer(layer);
}
void PagedKv::end_step() {
  impl_->end_step();
}
bool PagedKv::can_suspend() const {
  return impl_->in_step && impl_->plan.empty();
}
void PagedKv::suspend_step() {
  impl_->suspend_step();
}
void PagedKv::resume_step() {
  impl_->resume_step();
}
bool PagedKv::suspended() const {
  return impl_->suspended;
}
void PagedKv::write(SeqId seq, int layer, int pos, const float* k, const float* v) {
  impl_->write(seq, layer, pos, k, v);
}
void PagedKv::attend(SeqId seq, int layer, int kvh, int pos0, int n_tok, int group, const float* q,
                     int64_t q_stride, float* out, int64_t out_stride, int window,
                     int horizon) const {
  impl_->attend(seq, layer, kvh, pos0, n_tok, group, q, q_stride, out, out_stride, window, horizon);
}
bool PagedKv::can_split() const {
  return impl_->kern->tile_for_type(impl_->L.type) != nullptr;
}
int PagedKv::attend_segment_tokens() const {
  return impl_->segment_blocks() * impl_->L.block_tokens;
}
void PagedKv::attend_segment(SeqId seq, int layer, int kvh, int pos0, int n_tok, int group,
                             const float* q, int64_t q_stride, int segment, float* m, float* l,
                             float* acc) const {
  impl_->attend_segment(seq, layer, kvh, pos0, n_tok, group, q, q_stride, segment, m, l, acc);
}
void PagedKv::commit(SeqId seq, std::span<const int32_t> tokens) {
  impl_->commit(seq, tokens);
}
const std::string& PagedKv::failure(SeqId seq) const {
  return impl_->seq(seq).error;
}
KvStats PagedKv::stats() const {
  return impl_->stats();
}
const char* PagedKv::kernel_isa() const {
  return impl_->kern->isa;
}
void PagedKv::set_kernels(const AttendKernels& k) {
  impl_->kern = &k;
}
void PagedKv::set_event_sink(KvEventSink* sink) {
  impl_->events = sink;
}
void PagedKv::inject_flash_fault(IoKind kind, int count, int err, int after) {
  if (impl_->flash) impl_->flash->inject_fault(kind, count, err, after);
}
void PagedKv::check_invariants() const {
  impl_->check_invariants();
}

}  // namespace tern::kv
