#include "tern/vision/embedding_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/core/mapped_file.h"

namespace tern::vision {
namespace fs = std::filesystem;
namespace {

// One flash file: this header, then the rows (n_tokens, n_embd) as
// little-endian fp32. checksum = SHA-256 over the header up to the checksum
// field, then the rows.
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t n_tokens;
  uint32_t n_embd;
  uint32_t reserved;
  uint8_t key[32];
  uint8_t checksum[32];
};
static_assert(sizeof(FileHeader) == 88);
constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'E', 'M', 'B', 1};
constexpr uint32_t kVersion = 1;
constexpr const char* kExt = ".emb";

struct DigestHash {
  size_t operator()(const Sha256Digest& d) const {
    size_t h;
    std::memcpy(&h, d.data(), sizeof h);
    return h;
  }
};

size_t row_bytes(const Embeddings& e) {
  return e.data.size() * sizeof(float);
}

Sha256Digest file_checksum(const FileHeader& h, const float* rows, size_t n_bytes) {
  Sha256 s;
  s.update(&h, offsetof(FileHeader, checksum));
  s.update(rows, n_bytes);
  return s.finish();
}

// An LRU of keys with a byte size each; the payload lives beside it.
template <typename Value>
class Lru {
 public:
  struct Item {
    Value value;
    size_t bytes = 0;
    typename std::list<Sha256Digest>::iterator pos;
  };
  Item* get(const Sha256Digest& k, bool touch) {
    auto it = map_.find(k);
    if (it == map_.end()) return nullptr;
    if (touch) order_.splice(order_.begin(), order_, it->second.pos);
    return &it->second;
  }
  void put(const Sha256Digest& k, Value v, size_t bytes) {
    erase(k);
    order_.push_front(k);
    map_.emplace(k, Item{std::move(v), bytes, order_.begin()});
    bytes_ += bytes;
  }
  bool erase(const Sha256Digest& k) {
    auto it = map_.find(k);
    if (it == map_.end()) return false;
    bytes_ -= it->second.bytes;
    order_.erase(it->second.pos);
    map_.erase(it);
    return true;
  }
  // The least recently used key (the list must not be empty).
  const Sha256Digest& oldest() const { return order_.back(); }
  size_t bytes() const { return bytes_; }
  size_t size() const { return map_.size(); }

 private:
  std::list<Sha256Digest> order_;  // most recent first
  std::unordered_map<Sha256Digest, Item, DigestHash> map_;
  size_t bytes_ = 0;
};

bool hex_digest(const std::string& s, Sha256Digest& out) {
  if (s.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1 || !std::isxdigit(uint8_t(s[2 * i])) ||
        !std::isxdigit(uint8_t(s[2 * i + 1])))
      return false;
    out[i] = uint8_t(v);
  }
  return to_hex(out) == s;  // lower case only: one name per key
}

}  // namespace

Sha256Digest EmbeddingKey::digest() const {
  Sha256 s;
  s.update("tern-embedding-key-v1");
  s.update(pixels.data(), 32).update(projector.data(), 32).update(preprocess.data(), 32);
  return s.finish();
}

Sha256Digest projector_fingerprint(const std::string& path) {
  const MappedFile f = MappedFile::open(path);
  return sha256(f.data(), f.size());
}

Sha256Digest preprocess_fingerprint(const VisionConfig& c) {
  Sha256 s;
  s.update("tern-preprocess-v1").update(projector_name(c.projector));
  for (int v : {c.image_size, c.patch_size, c.preproc_image_size, c.merge})
    s.update_u32(uint32_t(v));
  for (float v : c.image_mean) s.update(&v, sizeof v);
  for (float v : c.image_std) s.update(&v, sizeof v);
  return s.finish();
}

struct EmbeddingCache::Impl {
  EmbeddingCacheOptions opts;
  std::shared_ptr<spdlog::logger> log = tern::log::get("vision");
  mutable std::mutex mu;
  Lru<Entry> dram;            // (mu)
  Lru<bool> flash;            // (mu) files in opts.flash_dir, by key digest
  EmbeddingCacheStats stats;  // (mu) counters; sizes are filled in by stats()
  bool flash_on = false;      // (mu)
  std::atomic<uint64_t> tmp_serial{0};

  std::string path_of(const Sha256Digest& d) const {
    return (fs::path(opts.flash_dir) / (to_hex(d) + kExt)).string();
  }

  void open_flash() {
    if (opts.flash_dir.empty() || opts.flash_bytes == 0) return;
    std::error_code ec;
    fs::create_directories(opts.flash_dir, ec);
    if (ec || !fs::is_directory(opts.flash_dir)) {
      log->warn("embedding cache: flash directory {} unusable ({}); DRAM only", opts.flash_dir,
                ec ? ec.message() : "not a directory");
      return;
    }
    // Index what a previous run left, oldest first so the newest are most recent.
    std::vector<std::pair<fs::file_time_type, fs::directory_entry>> files;
    for (const auto& e : fs::directory_iterator(opts.flash_dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.find(".tmp") != std::string::npos) fs::remove(e.path(), ec);  // a write cut short
      if (e.path().extension() == kExt && e.is_regular_file(ec))
        files.emplace_back(e.last_write_time(ec), e);
    }
    std::sort(files.begin(), files.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [t, e] : files) {
      Sha256Digest d;
      if (!hex_digest(e.path().stem().string(), d)) continue;
      flash.put(d, true, size_t(e.file_size(ec)));
    }
    flash_on = true;
    trim_flash();
  }

  // (mu held) Drops the least recently used DRAM entry, uncharging it.
  size_t evict_oldest() {
    const size_t n = dram.get(dram.oldest(), false)->bytes;
    dram.erase(dram.oldest());
    ++stats.dram.evictions;
    if (opts.budget) opts.budget->uncharge(MemPool::MmCache, n);
    return n;
  }
  // (mu held) Puts e in DRAM if it fits --mm-cache-mb and the memory budget
  // after evicting older entries; else leaves it out (the caller keeps it).
  void keep(const Sha256Digest& d, const Entry& e) {
    const size_t n = row_bytes(*e);
    if (auto* old = dram.get(d, false)) {  // replaced: its bytes come back first
      if (opts.budget) opts.budget->uncharge(MemPool::MmCache, old->bytes);
      dram.erase(d);
    }
    if (n > opts.dram_bytes) {  // could never fit: as before, counted as an eviction
      ++stats.dram.evictions;
      return;
    }
    while (dram.size() > 0 && dram.bytes() + n > opts.dram_bytes) evict_oldest();
    if (opts.budget) {
      while (!opts.budget->try_charge(MemPool::MmCache, n)) {
        if (dram.size() == 0) {
          ++stats.not_kept;
          return;
        }
        evict_oldest();
      }
    }
    dram.put(d, e, n);
  }
  void trim_flash() {
    while (flash.bytes() > opts.flash_bytes && flash.size() > 0) {
      const Sha256Digest d = flash.oldest();
      flash.erase(d);
      std::error_code ec;
      fs::remove(path_of(d), ec);
      ++stats.flash.evictions;
    }
  }

  // Reads and verifies a flash file; nullptr (and the file deleted) if damaged.
  Entry load(const Sha256Digest& d) {
    const std::string path = path_of(d);
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {  // deleted behind our back: forget it
      std::lock_guard lock(mu);
      flash.erase(d);
      return nullptr;
    }
    auto rows = std::make_shared<Embeddings>();
    FileHeader h{};
    bool ok = std::fread(&h, sizeof h, 1, f) == 1 && std::memcmp(h.magic, kMagic, 8) == 0 &&
              h.version == kVersion && std::memcmp(h.key, d.data(), 32) == 0 && h.n_tokens > 0 &&
              h.n_embd > 0 && uint64_t(h.n_tokens) * h.n_embd * 4 <= opts.flash_bytes;
    if (ok) {
      rows->n_tokens = int(h.n_tokens);
      rows->n_embd = int(h.n_embd);
      rows->data.resize(size_t(h.n_tokens) * h.n_embd);
      ok =
          std::fread(rows->data.data(), sizeof(float), rows->data.size(), f) == rows->data.size() &&
          std::fgetc(f) == EOF;
    }
    std::fclose(f);
    if (ok) {
      const Sha256Digest sum = file_checksum(h, rows->data.data(), row_bytes(*rows));
      ok = std::memcmp(sum.data(), h.checksum, 32) == 0;
    }
    if (ok) return rows;
    std::error_code ec;
    fs::remove(path, ec);
    std::lock_guard lock(mu);
    flash.erase(d);
    ++stats.flash_dropped;
    log->warn("embedding cache: dropped damaged flash entry {}", path);
    return nullptr;
  }

  // Writes a flash file (temp + rename); false on any error.
  bool store(const Sha256Digest& d, const Embeddings& e) {
    FileHeader h{};
    std::memcpy(h.magic, kMagic, 8);
    h.version = kVersion;
    h.n_tokens = uint32_t(e.n_tokens);
    h.n_embd = uint32_t(e.n_embd);
    std::memcpy(h.key, d.data(), 32);
    const Sha256Digest sum = file_checksum(h, e.data.data(), row_bytes(e));
    std::memcpy(h.checksum, sum.data(), 32);
    const std::string path = path_of(d);
    // Unique per write: two threads storing the same key must not share a temp file.
    const std::string tmp =
        path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(++tmp_serial);
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return false;
    bool ok = std::fwrite(&h, sizeof h, 1, f) == 1 &&
              std::fwrite(e.data.data(), sizeof(float), e.data.size(), f) == e.data.size();
    ok = (std::fclose(f) == 0) && ok;
    std::error_code ec;
    if (ok) fs::rename(tmp, path, ec);
    if (!ok || ec) {
      fs::remove(tmp, ec);
      return false;
    }
    return true;
  }
};

EmbeddingCache::EmbeddingCache(EmbeddingCacheOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->open_flash();
  if (MemoryBudget* b = impl_->opts.budget)
    b->set_reclaimer(MemPool::MmCache, [this](size_t want) { return evict_dram(want); });
}

EmbeddingCache::~EmbeddingCache() {
  Impl& m = *impl_;
  if (!m.opts.budget) return;
  m.opts.budget->set_reclaimer(MemPool::MmCache, {});
  std::lock_guard lock(m.mu);
  m.opts.budget->uncharge(MemPool::MmCache, m.dram.bytes());
}

size_t EmbeddingCache::evict_dram(size_t bytes) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  size_t freed = 0;
  while (freed < bytes && m.dram.size() > 0) freed += m.evict_oldest();
  m.stats.reclaimed_bytes += freed;
  return freed;
}

EmbeddingCache::Entry EmbeddingCache::find(const EmbeddingKey& key) {
  const Sha256Digest d = key.digest();
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    if (auto* item = m.dram.get(d, true)) {
      ++m.stats.dram.hits;
      return item->value;
    }
    if (!m.flash_on || !m.flash.get(d, true)) {
      ++m.stats.misses;
      return nullptr;
    }
  }
  Entry e = m.load(d);  // outside the lock: file I/O
  std::lock_guard lock(m.mu);
  if (!e) {
    ++m.stats.misses;
    return nullptr;
  }
  ++m.stats.flash.hits;
  m.keep(d, e);
  return e;
}

EmbeddingCache::Entry EmbeddingCache::insert(const EmbeddingKey& key, Embeddings rows) {
  if (rows.n_tokens <= 0 || rows.n_embd <= 0 ||
      rows.data.size() != size_t(rows.n_tokens) * size_t(rows.n_embd))
    throw InvalidArgument("embedding cache: rows do not match their shape");
  const Sha256Digest d = key.digest();
  auto e = std::make_shared<const Embeddings>(std::move(rows));
  Impl& m = *impl_;
  bool write = false;
  {
    std::lock_guard lock(m.mu);
    ++m.stats.inserts;
    m.keep(d, e);
    write = m.flash_on && !m.flash.get(d, true) && row_bytes(*e) <= m.opts.flash_bytes;
  }
  if (!write) return e;
  const bool ok = m.store(d, *e);
  std::lock_guard lock(m.mu);
  if (!ok) {
    ++m.stats.flash_write_errors;
    if (m.flash_on)
      m.log->warn("embedding cache: cannot write to {} (disk full?); flash tier off, DRAM only",
                  m.opts.flash_dir);
    m.flash_on = false;
    return e;
  }
  m.flash.put(d, true, sizeof(FileHeader) + row_bytes(*e));
  m.trim_flash();
  return e;
}

EmbeddingCache::Entry EmbeddingCache::get_or_encode(const EmbeddingKey& key,
                                                    const std::function<Embeddings()>& encode,
                                                    bool* hit) {
  if (Entry e = find(key)) {
    if (hit) *hit = true;
    return e;
  }
  if (hit) *hit = false;
  return insert(key, encode());
}

EmbeddingCacheStats EmbeddingCache::stats() const {
  std::lock_guard lock(impl_->mu);
  EmbeddingCacheStats s = impl_->stats;
  s.dram.entries = impl_->dram.size();
  s.dram.bytes = impl_->dram.bytes();
  s.flash.entries = impl_->flash.size();
  s.flash.bytes = impl_->flash.bytes();
  s.flash_enabled = impl_->flash_on;
  return s;
}

}  // namespace tern::vision
