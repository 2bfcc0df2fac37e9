// libFuzzer target for the vision embedding cache's flash entries
// (vision/embedding_cache.cpp): a previous run's file in the flash directory,
// indexed when the cache opens and read back and verified by find().
//
// Byte 0 of the input holds flags, the rest is the entry file. Bit 0 writes
// the looked-up key into the header and bit 1 recomputes the checksum (over
// the header up to it and the rows), so the fuzzer gets past both.
// Seeds: `fuzz_seeds embedding_cache DIR` (entries written by insert()).
// Every input must be found or dropped without an exception; an entry found
// must have the shape its rows say, and a dropped file must be gone.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <vector>

#include "fuzz_fixtures.h"
#include "fuzz_util.h"
#include "tern/core/sha256.h"
#include "tern/vision/embedding_cache.h"

namespace {

using tern::fuzz::check;

// FileHeader in embedding_cache.cpp: magic 8, version, n_tokens, n_embd,
// reserved (u32 each), key 32, checksum 32.
constexpr size_t kKeyAt = 24, kSumAt = 56, kHeader = 88;
constexpr size_t kFlashBytes = 256 * 1024;

void fix_up(std::vector<uint8_t>& file, uint8_t flags, const tern::Sha256Digest& key) {
  if (file.size() < kHeader) return;
  if (flags & 1) std::memcpy(file.data() + kKeyAt, key.data(), 32);
  if (flags & 2) {
    tern::Sha256 s;
    s.update(file.data(), kSumAt);
    s.update(file.data() + kHeader, file.size() - kHeader);
    const tern::Sha256Digest d = s.finish();
    std::memcpy(file.data() + kSumAt, d.data(), 32);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  namespace fs = std::filesystem;
  const tern::vision::EmbeddingKey key = tern::fuzz::embedding_key();
  const tern::Sha256Digest d = key.digest();
  const std::string dir = tern::fuzz::scratch_dir() + "/emb";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  const std::string path = dir + "/" + tern::to_hex(d) + ".emb";
  std::vector<uint8_t> file(data + 1, data + size);
  fix_up(file, data[0], d);
  tern::fuzz::write_file(path, file);

  tern::vision::EmbeddingCache cache(
      {.dram_bytes = kFlashBytes, .flash_dir = dir, .flash_bytes = kFlashBytes});
  const tern::vision::EmbeddingCache::Entry e = cache.find(key);
  const tern::vision::EmbeddingCacheStats st = cache.stats();
  if (e) {
    check(e->n_tokens > 0 && e->n_embd > 0);
    check(e->data.size() == size_t(e->n_tokens) * size_t(e->n_embd));
    check(st.flash.hits == 1 && st.flash_dropped == 0);
  } else {
    check(st.misses == 1);
    check(!fs::exists(path));
  }
  return 0;
}
