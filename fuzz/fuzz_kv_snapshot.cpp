// libFuzzer target for the prefix-cache snapshot reader (`tern serve
// --cache-dir`): kv::load_prefix_cache reading DIR/prefix-cache.tkv into a
// small KV cache (fuzz_fixtures.h), i.e. kv_persist.cpp's header, fingerprint
// and layout checks and record loop, and PagedKv::import_cached.
//
// Byte 0 of the input holds flags, the rest is the file. The header and each
// record carry a SHA-256 that random bytes never match, so the flags let the
// fuzzer reach the code behind them: bit 0 rewrites the header checksum, bit
// 1 every whole record's checksum, before the file is written; bit 2 turns
// the KV flash tier on (blocks are then imported into the spill file).
// Seeds: `fuzz_seeds kv_snapshot DIR` (files written by save_prefix_cache).
// Every input must load or be ignored without an exception; what it loaded
// must add up, and every block it exports back must be whole.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_fixtures.h"
#include "fuzz_util.h"
#include "tern/core/sha256.h"
#include "tern/kv/kv_persist.h"
#include "tern/kv/paged_kv.h"

namespace {

using tern::fuzz::check;

constexpr size_t kRecordHead = 64;  // block hash + checksum

// Header bytes before its checksum: magic, version, fingerprint length and
// bytes, type + padding, four i32, block bytes, record count.
size_t header_body(const tern::kv::KvConfig& c) {
  return 16 + c.model_fingerprint.size() + 4 + 16 + 8 + 8;
}

void fix_checksums(std::vector<uint8_t>& file, uint8_t flags, const tern::kv::KvConfig& c,
                   size_t block_bytes) {
  const size_t body = header_body(c);
  if ((flags & 1) && file.size() >= body + 32) {
    const tern::Sha256Digest d = tern::sha256(file.data(), body);
    std::copy(d.begin(), d.end(), file.begin() + long(body));
  }
  if (!(flags & 2)) return;
  tern::Sha256 sha;
  const size_t rec = kRecordHead + block_bytes;
  for (size_t at = body + 32; at + rec <= file.size(); at += rec) {
    sha.update(file.data() + at, 32);
    sha.update(file.data() + at + kRecordHead, block_bytes);
    const tern::Sha256Digest d = sha.finish();
    std::copy(d.begin(), d.end(), file.begin() + long(at + 32));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string& dir = tern::fuzz::scratch_dir();
  tern::kv::KvConfig cfg = tern::fuzz::snapshot_kv();
  if (flags & 4) {
    cfg.flash_dir = dir + "/flash";
    cfg.flash_bytes = 64 * 1024;
  }
  tern::kv::PagedKv kv(cfg);
  std::vector<uint8_t> file(data + 1, data + size);
  fix_checksums(file, flags, cfg, kv.layout().block_bytes);
  tern::fuzz::write_file(tern::kv::cache_file_path(dir), file);

  const tern::kv::PersistStats st = tern::kv::load_prefix_cache(kv, dir);
  check(st.blocks >= 0 && st.dropped >= 0 && st.no_room >= 0);
  check(st.bytes <= int64_t(file.size()));
  check(!st.ignored || st.blocks == 0);
  int64_t exported = 0;
  kv.export_cached([&](const tern::kv::BlockHash&, std::span<const uint8_t> b) {
    check(b.size() == kv.layout().block_bytes);
    ++exported;
    return true;
  });
  check(exported <= st.blocks);  // a later import may evict an earlier one
  return 0;
}
