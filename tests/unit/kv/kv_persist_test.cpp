// The persistent prefix cache (kv_persist.h): a saved cache, loaded into a
// fresh PagedKv, gives prefix hits whose attention outputs are bit-identical
// to a cold run; damaged records are dropped and only them; a file for
// another model or layout is ignored; the lock keeps a second server out.
#include "tern/kv/kv_persist.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "kv_test_util.h"
#include "tern/core/sha256.h"

namespace tern::kv {
namespace {

using namespace test;
using Clock = std::chrono::steady_clock;

constexpr int kBlock = 8;
constexpr int kTokens = 100;  // 12 full blocks

KvConfig config(const FakeModel& fm, const std::string& flash_dir, KvType t = KvType::Int8Fp8) {
  KvConfig c = flash_dir.empty() ? small_config(fm, t, kBlock, 32)
                                 : flash_config(fm, t, kBlock, 32, 8, 1, flash_dir, 64);
  c.model_fingerprint = "model-A";
  return c;
}

Clock::time_point later() {
  return Clock::now() + std::chrono::seconds(60);
}

// Runs one conversation in a fresh cache and saves the cache to dir.
PersistStats fill_and_save(const KvConfig& c, const std::vector<int32_t>& toks,
                           const std::string& dir) {
  const FakeModel fm;
  PagedKv kv(c);
  Conv a(fm, toks);
  run_conv(kv, fm, a, 16);
  kv.release(a.seq);
  return save_prefix_cache(kv, dir, size_t(1) << 30, later());
}

// Loads dir into a fresh cache, runs the conversation extended by a few
// tokens, checks its outputs against a cold run; returns the tokens reused.
int load_and_check(const KvConfig& c, const std::vector<int32_t>& toks, const std::string& dir,
                   PersistStats* loaded = nullptr) {
  const FakeModel fm;
  PagedKv kv(c);
  const PersistStats st = load_prefix_cache(kv, dir);
  if (loaded) *loaded = st;
  kv.check_invariants();
  std::vector<int32_t> more = toks;
  for (int i = 0; i < 9; ++i) more.push_back(int32_t(7 * i + 1));
  Conv b(fm, more);
  const int reused = run_conv(kv, fm, b, 16);
  kv.check_invariants();
  PagedKv cold(config(fm, ""));
  Conv ref(fm, more);
  run_conv(cold, fm, ref, 16, false);
  EXPECT_TRUE(same_outputs(fm, b, ref, reused, int(more.size())));
  return reused;
}

TEST(KvPersist, RoundTripThroughFlashAndDram) {
  const FakeModel fm;
  const auto toks = tokens(3, kTokens);
  for (bool with_flash : {true, false}) {
    TempDir cache("persist-rt"), spill("persist-rt-spill");
    const KvConfig c = config(fm, with_flash ? spill.path : "");
    const PersistStats saved = fill_and_save(c, toks, cache.path);
    ASSERT_FALSE(saved.failed) << saved.message;
    EXPECT_EQ(saved.blocks, kTokens / kBlock);
    EXPECT_FALSE(std::filesystem::exists(cache_file_path(cache.path) + ".tmp"));
    PersistStats loaded;
    EXPECT_EQ(load_and_check(c, toks, cache.path, &loaded), kTokens / kBlock * kBlock);
    EXPECT_EQ(loaded.blocks, kTokens / kBlock) << loaded.message;
    EXPECT_EQ(loaded.dropped, 0);
    EXPECT_FALSE(loaded.ignored);
  }
}

TEST(KvPersist, ReloadedFlashBlocksCountAsFlashHits) {
  const FakeModel fm;
  TempDir cache("persist-hits"), spill("persist-hits-spill");
  const KvConfig c = config(fm, spill.path);
  const auto toks = tokens(4, kTokens);
  ASSERT_FALSE(fill_and_save(c, toks, cache.path).failed);
  PagedKv kv(c);
  load_prefix_cache(kv, cache.path);
  EXPECT_EQ(kv.stats().flash_cached, kTokens / kBlock);
  Conv b(fm, toks);
  EXPECT_EQ(run_conv(kv, fm, b, 16), kTokens / kBlock * kBlock);
  EXPECT_EQ(kv.stats().tokens_reused_flash, kTokens / kBlock * kBlock);
}

TEST(KvPersist, DamagedRecordIsDroppedAndOnlyIt) {
  const FakeModel fm;
  TempDir cache("persist-bad"), spill("persist-bad-spill");
  const KvConfig c = config(fm, spill.path);
  const auto toks = tokens(5, kTokens);
  ASSERT_FALSE(fill_and_save(c, toks, cache.path).failed);
  // Records are most recently used first; release() leaves a chain's first
  // block the most recent, so record 5 is block 5: damage its payload.
  const std::string file = cache_file_path(cache.path);
  const size_t size = std::filesystem::file_size(file);
  const size_t rec = 64 + PagedKv(c).layout().block_bytes;
  const size_t head = size - size_t(kTokens / kBlock) * rec;
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(head + 5 * rec + 64 + 17));
    f.put(char(0x5a));
  }
  PersistStats loaded;
  const int reused = load_and_check(c, toks, cache.path, &loaded);
  EXPECT_EQ(loaded.dropped, 1) << loaded.message;
  EXPECT_EQ(loaded.blocks, kTokens / kBlock - 1);
  EXPECT_EQ(reused, 5 * kBlock);  // the chain breaks at the dropped block
}

TEST(KvPersist, TruncatedFileKeepsTheRecordsBeforeTheCut) {
  const FakeModel fm;
  TempDir cache("persist-cut"), spill("persist-cut-spill");
  const KvConfig c = config(fm, spill.path);
  const auto toks = tokens(6, kTokens);
  ASSERT_FALSE(fill_and_save(c, toks, cache.path).failed);
  const std::string file = cache_file_path(cache.path);
  const size_t rec = 64 + PagedKv(c).layout().block_bytes;
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - rec - rec / 2);
  PersistStats loaded;
  load_and_check(c, toks, cache.path, &loaded);
  EXPECT_EQ(loaded.blocks, kTokens / kBlock - 2);
  EXPECT_EQ(loaded.dropped, 2);
  // Cut inside the header: ignored, the cache starts empty.
  std::filesystem::resize_file(file, 20);
  EXPECT_EQ(load_and_check(c, toks, cache.path, &loaded), 0);
  EXPECT_TRUE(loaded.ignored);
}

// A header whose record count is huge (checksum and all: a file written by
// something else) over a file with a damaged record: the tally of dropped
// records saturates instead of overflowing (found by fuzz_kv_snapshot).
TEST(KvPersist, HugeRecordCountOverADroppedRecordSaturates) {
  const FakeModel fm;
  TempDir cache("persist-huge"), spill("persist-huge-spill");
  const KvConfig c = config(fm, spill.path);
  const auto toks = tokens(8, kTokens);
  ASSERT_FALSE(fill_and_save(c, toks, cache.path).failed);
  const std::string file = cache_file_path(cache.path);
  std::vector<char> bytes(std::filesystem::file_size(file));
  std::ifstream(file, std::ios::binary).read(bytes.data(), std::streamsize(bytes.size()));
  const size_t rec = 64 + PagedKv(c).layout().block_bytes;
  const size_t head = bytes.size() - size_t(kTokens / kBlock) * rec;
  const uint64_t huge = ~uint64_t(0);
  std::memcpy(bytes.data() + head - 40, &huge, 8);
  const Sha256Digest d = sha256(reinterpret_cast<const uint8_t*>(bytes.data()), head - 32);
  std::memcpy(bytes.data() + head - 32, d.data(), 32);
  bytes[head + 64 + 3] ^= 0x55;  // record 0's payload
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), std::streamsize(bytes.size()));
  PersistStats loaded;
  load_and_check(c, toks, cache.path, &loaded);
  EXPECT_FALSE(loaded.ignored) << loaded.message;
  EXPECT_EQ(loaded.blocks, kTokens / kBlock - 1);
  EXPECT_EQ(loaded.dropped, INT64_MAX);
}

TEST(KvPersist, AnotherModelOrLayoutIsIgnored) {
  const FakeModel fm;
  TempDir cache("persist-fp"), spill("persist-fp-spill");
  const KvConfig c = config(fm, spill.path);
  const auto toks = tokens(7, kTokens);
  ASSERT_FALSE(fill_and_save(c, toks, cache.path).failed);
  KvConfig other = c;
  other.model_fingerprint = "model-B";
  PersistStats loaded;
  EXPECT_EQ(load_and_check(other, toks, cache.path, &loaded), 0);
  EXPECT_TRUE(loaded.ignored);
  EXPECT_NE(loaded.message.find("another model"), std::string::npos) << loaded.message;
  other.model_fingerprint = "model-A-longer";
  EXPECT_EQ(load_and_check(other, toks, cache.path, &loaded), 0);
  EXPECT_TRUE(loaded.ignored);
  PagedKv int4(config(fm, spill.path, KvType::Int4Fp8));
  loaded = load_prefix_cache(int4, cache.path);
  EXPECT_TRUE(loaded.ignored);
  EXPECT_NE(loaded.message.find("KV layout"), std::string::npos) << loaded.message;
  EXPECT_EQ(int4.stats().flash_cached, 0);
  // Not a cache file at all.
  std::ofstream(cache_file_path(cache.path), std::ios::trunc) << "hello, this is not a cache file";
  EXPECT_EQ(load_and_check(c, toks, cache.path, &loaded), 0);
  EXPECT_TRUE(loaded.ignored);
}

TEST(KvPersist, BudgetAndDeadlineKeepTheMostRecentBlocks) {
  const FakeModel fm;
  TempDir cache("persist-budget"), spill("persist-budget-spill");
  const KvConfig c = config(fm, spill.path);
  PagedKv kv(c);
  Conv a(fm, tokens(8, kTokens)), b(fm, tokens(9, kTokens));
  run_conv(kv, fm, a, 16);
  kv.release(a.seq);
  run_conv(kv, fm, b, 16);  // b stays live: the most recent
  const size_t rec = 64 + kv.layout().block_bytes;
  PersistStats st = save_prefix_cache(kv, cache.path, 1024 + 12 * rec, later());
  EXPECT_EQ(st.blocks, 12);
  PagedKv fresh(c);
  load_prefix_cache(fresh, cache.path);
  Conv b2(fm, b.toks), a2(fm, a.toks);
  EXPECT_EQ(run_conv(fresh, fm, b2, 16), 96);
  EXPECT_EQ(run_conv(fresh, fm, a2, 16), 0);
  st = save_prefix_cache(kv, cache.path, size_t(1) << 30, Clock::now());
  EXPECT_TRUE(st.timed_out);
  EXPECT_EQ(st.blocks, 0);
}

TEST(KvPersist, LockKeepsASecondServerOut) {
  TempDir cache("persist-lock");
  {
    CacheDirLock first(cache.path);
    try {
      CacheDirLock second(cache.path);
      FAIL() << "a second lock on one directory succeeded";
    } catch (const CacheDirInUse& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(::getpid())), std::string::npos)
          << e.what();
    }
  }
  CacheDirLock again(cache.path);  // released with the first
}

}  // namespace
}  // namespace tern::kv

namespace tern::kv {
namespace {

// A snapshot that cannot be completed (here: a flash read fails while
// exporting) leaves the previous file as it was; a flash tier that fails
// writes while loading leaves the blocks in DRAM.
TEST(KvPersist, FailedSaveKeepsThePreviousFileAndFlashFaultsFallBackToDram) {
  const FakeModel fm;
  TempDir cache("persist-fault"), spill("persist-fault-spill");
  const KvConfig c = config(fm, spill.path);
  const auto toks = tokens(10, kTokens);
  ASSERT_FALSE(fill_and_save(c, toks, cache.path).failed);
  const auto before = std::filesystem::file_size(cache_file_path(cache.path));
  {
    PagedKv kv(c);
    load_prefix_cache(kv, cache.path);  // every block on flash now
    kv.inject_flash_fault(IoKind::Read, 1, EIO, 3);
    const PersistStats st = save_prefix_cache(kv, cache.path, size_t(1) << 30, later());
    EXPECT_TRUE(st.failed);
    EXPECT_NE(st.message.find("previous cache file"), std::string::npos) << st.message;
  }
  EXPECT_EQ(std::filesystem::file_size(cache_file_path(cache.path)), before);
  EXPECT_FALSE(std::filesystem::exists(cache_file_path(cache.path) + ".tmp"));
  PagedKv kv(c);
  kv.inject_flash_fault(IoKind::Write, 1000, ENOSPC);
  const PersistStats st = load_prefix_cache(kv, cache.path);
  EXPECT_EQ(st.blocks, kTokens / kBlock) << st.message;
  EXPECT_EQ(kv.stats().dram_cached, kTokens / kBlock);
  kv.check_invariants();
}

}  // namespace
}  // namespace tern::kv
