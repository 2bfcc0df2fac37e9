// Flash faults fail only the requests that needed the failed I/O, with a
// clear message, and never corrupt the cache: an unusable folder fails at
// start-up; a failed spill write fails that reserve(); a failed read fails
// the sequences that use the block (others in the same step are untouched)
// and unregisters it; a failed write-back of a cached block just drops it.
#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>

#include "kv_test_util.h"

namespace tern::kv {
namespace {

using namespace test;

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool matches_solo(const FakeModel& fm, const Conv& c, int from, int to) {
  PagedKv big(small_config(fm, KvType::Int8Fp8, 8, 64));
  Conv ref(fm, c.toks);
  run_conv(big, fm, ref, 8, false);
  return same_outputs(fm, c, ref, from, to);
}

TEST(PagedKvFault, UnusableFlashFolderFailsAtStartWithItsName) {
  const FakeModel fm;
  TempDir dir("unusable");
  const std::string file = dir.path + "/not-a-folder";
  std::ofstream(file) << "x";
  try {
    PagedKv kv(flash_config(fm, KvType::Int8Fp8, 8, 8, 8, 1, file + "/kv", 16));
    FAIL() << "expected KvIoError";
  } catch (const KvIoError& e) {
    EXPECT_NE(std::string(e.what()).find(file + "/kv"), std::string::npos) << e.what();
  }
}

TEST(PagedKvFault, FailedSpillWriteFailsOnlyThatReserve) {
  const FakeModel fm;
  TempDir dir("spillfail");
  PagedKv kv(flash_config(fm, KvType::Int8Fp8, 8, 6, 8, 1, dir.path, 32));
  Conv a(fm, tokens(50, 48)), b(fm, tokens(51, 24));
  a.seq = kv.create();
  run_step(kv, fm, {{&a, 40}});  // 5 of 6 frames
  b.seq = kv.create();
  kv.inject_flash_fault(IoKind::Write, 1000, ENOSPC);
  try {
    run_step(kv, fm, {{&b, 24}});  // needs 3: one free frame + two spills, which fail
    FAIL() << "expected KvIoError";
  } catch (const KvIoError& e) {
    EXPECT_NE(std::string(e.what()).find(strerror(ENOSPC)), std::string::npos) << e.what();
  }
  kv.check_invariants();
  EXPECT_GE(kv.stats().write_errors, 2);
  run_step(kv, fm, {{&a, 8}});  // a goes on in DRAM
  EXPECT_TRUE(kv.failure(a.seq).empty());
  EXPECT_TRUE(matches_solo(fm, a, 0, 48));
  kv.inject_flash_fault(IoKind::Write, 0, 0);  // the disk recovers
  run_step(kv, fm, {{&b, 24}});
  EXPECT_TRUE(matches_solo(fm, b, 0, 24));
  kv.check_invariants();
}

TEST(PagedKvFault, FailedStreamReadFailsOnlySequencesUsingTheBlock) {
  const FakeModel fm;
  TempDir dir("readfail");
  PagedKv kv(flash_config(fm, KvType::Int8Fp8, 8, 8, 16, 1, dir.path, 32));
  Conv a(fm, tokens(60, 80)), c(fm, tokens(61, 16));
  a.seq = kv.create();
  run_step(kv, fm, {{&a, 64}});  // 8 frames
  c.seq = kv.create();
  run_step(kv, fm, {{&c, 8}});  // spills a's oldest block
  EXPECT_EQ(kv.stats().flash_live, 1);
  kv.inject_flash_fault(IoKind::Read, 1000, EIO);
  run_step(kv, fm, {{&a, 8}, {&c, 8}});
  const std::string why = kv.failure(a.seq);
  EXPECT_NE(why.find(strerror(EIO)), std::string::npos) << why;
  EXPECT_TRUE(kv.failure(c.seq).empty());
  EXPECT_TRUE(matches_solo(fm, c, 0, 16));  // c, in the same steps, is untouched
  for (int p = 64; p < 72; ++p) {           // a's outputs are zeros, not garbage
    for (float x : a.at(fm, p, 0)) ASSERT_EQ(x, 0.0f);
  }
  EXPECT_THROW(kv.reserve(a.seq, 1), KvIoError);
  EXPECT_GE(kv.stats().read_errors, 1);
  kv.check_invariants();
  kv.release(a.seq);
  kv.inject_flash_fault(IoKind::Read, 0, 0);
  kv.check_invariants();
  // The lost block (a's first) is gone from the index: nothing of a is
  // reusable, and what a computed after the failure was never registered.
  const SeqId s = kv.create();
  EXPECT_EQ(kv.attach_prefix(s, concat(a.toks, {1})), 0);
  kv.release(s);
  kv.check_invariants();
}

TEST(PagedKvFault, FailedReloadFailsTheSequenceAndTheNextTurnRecomputes) {
  const FakeModel fm;
  TempDir dir("reloadfail");
  PagedKv kv(flash_config(fm, KvType::Int8Fp8, 8, 6, 8, 1, dir.path, 32));
  Conv a(fm, tokens(70, 40)), x(fm, tokens(71, 38));
  run_conv(kv, fm, a, 40);
  kv.release(a.seq);
  run_conv(kv, fm, x, 38);  // evicts 4 of a's blocks to flash
  kv.release(x.seq);
  kv.inject_flash_fault(IoKind::Read, 1, EIO);  // the whole-block reload fails
  Conv a2(fm, concat(a.toks, tokens(72, 9)));
  a2.seq = kv.create();
  a2.pos = kv.attach_prefix(a2.seq, a2.toks);
  EXPECT_EQ(a2.pos, 40);
  run_step(kv, fm, {{&a2, 9}});
  EXPECT_FALSE(kv.failure(a2.seq).empty());
  kv.release(a2.seq);
  kv.check_invariants();
  Conv a3(fm, a2.toks);
  EXPECT_EQ(run_conv(kv, fm, a3, 9), 8);  // only the block before the lost one
  EXPECT_TRUE(kv.failure(a3.seq).empty());
  EXPECT_TRUE(matches_solo(fm, a3, 8, 49));
}

TEST(PagedKvFault, FailedWriteBackDropsCachedBlocksAndRecomputes) {
  const FakeModel fm;
  TempDir dir("writeback");
  PagedKv kv(flash_config(fm, KvType::Int8Fp8, 8, 6, 8, 1, dir.path, 32));
  Conv a(fm, tokens(80, 40)), x(fm, tokens(81, 38));
  run_conv(kv, fm, a, 40);
  kv.release(a.seq);
  kv.inject_flash_fault(IoKind::Write, 1000, EIO);
  run_conv(kv, fm, x, 38);  // the evictions fail to write: a's blocks are dropped, x runs
  EXPECT_TRUE(matches_solo(fm, x, 0, 38));
  const KvStats st = kv.stats();
  EXPECT_EQ(st.write_errors, 4);
  EXPECT_EQ(st.blocks_dropped, 4);
  kv.release(x.seq);
  kv.inject_flash_fault(IoKind::Write, 0, 0);
  Conv a2(fm, concat(a.toks, {3}));
  EXPECT_EQ(run_conv(kv, fm, a2, 41), 8);
  EXPECT_TRUE(matches_solo(fm, a2, 8, 41));
  kv.check_invariants();
}

}  // namespace
}  // namespace tern::kv
