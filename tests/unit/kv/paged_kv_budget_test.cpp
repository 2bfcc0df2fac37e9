// PagedKv under a memory budget (core/memory_budget.h): frames are charged
// while they hold blocks, the budget caps what the KV may use, and the KV
// gives back only unreferenced cached blocks when asked (to flash when it has
// a flash tier), never a live sequence's.
#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "tern/core/memory_budget.h"

namespace tern::kv::test {
namespace {

size_t block_bytes(const FakeModel& fm, KvType t, int B) {
  return KvLayout::make(fm.n_layers, fm.n_kv_heads, fm.head_dim, B, t).block_bytes;
}

TEST(PagedKvBudget, FramesAreChargedWhileTheyHoldBlocks) {
  const FakeModel fm;
  const size_t bb = block_bytes(fm, KvType::Int8Fp8, 8);
  MemoryBudget budget(64 * bb);
  {
    KvConfig c = small_config(fm, KvType::Int8Fp8, 8, 16);
    c.budget = &budget;
    PagedKv kv(c);
    EXPECT_EQ(budget.used(MemPool::Kv), 0u);
    Conv a(fm, tokens(1, 37));  // 5 blocks, the last one partial
    run_conv(kv, fm, a, 16);
    EXPECT_EQ(budget.used(MemPool::Kv), 5 * bb);
    kv.release(a.seq);  // 4 full blocks stay cached, the partial one is freed
    EXPECT_EQ(budget.used(MemPool::Kv), 4 * bb);
    kv.check_invariants();
  }
  EXPECT_EQ(budget.used(), 0u);  // the KV gives everything back when it goes
}

TEST(PagedKvBudget, TheBudgetCapsTheFramesTheKvMayUse) {
  const FakeModel fm;
  const size_t bb = block_bytes(fm, KvType::Int8Fp8, 8);
  MemoryBudget budget(10 * bb);
  ASSERT_TRUE(budget.try_charge(MemPool::MmRequests, 6 * bb));  // images of running requests
  KvConfig c = small_config(fm, KvType::Int8Fp8, 8, 16);
  c.budget = &budget;
  PagedKv kv(c);
  EXPECT_EQ(kv.available_blocks(), 4);  // 16 frames, room for 4
  Conv a(fm, tokens(2, 32));
  run_conv(kv, fm, a, 32);  // exactly 4 blocks
  const SeqId b = kv.create();
  EXPECT_THROW(kv.reserve(b, 1), KvFullError);
  EXPECT_LE(budget.used(), budget.total());
  budget.uncharge(MemPool::MmRequests, 6 * bb);
  kv.reserve(b, 1);  // room again
  kv.release(b);
  kv.release(a.seq);
  kv.check_invariants();
}

TEST(PagedKvBudget, KvTakesRoomFromTheEmbeddingCacheReclaimer) {
  const FakeModel fm;
  const size_t bb = block_bytes(fm, KvType::Int8Fp8, 8);
  MemoryBudget budget(6 * bb);
  ASSERT_TRUE(budget.try_charge(MemPool::MmCache, 5 * bb));
  size_t evicted = 0;  // an embedding cache that evicts whatever is asked
  budget.set_reclaimer(MemPool::MmCache, [&](size_t want) {
    const size_t n = std::min(want, budget.used(MemPool::MmCache));
    budget.uncharge(MemPool::MmCache, n);
    evicted += n;
    return n;
  });
  KvConfig c = small_config(fm, KvType::Int8Fp8, 8, 16);
  c.budget = &budget;
  PagedKv kv(c);
  EXPECT_EQ(kv.available_blocks(), 6);  // 1 free + 5 the cache would give back
  Conv a(fm, tokens(3, 40));
  run_conv(kv, fm, a, 40);
  EXPECT_EQ(budget.used(MemPool::Kv), 5 * bb);
  EXPECT_EQ(evicted, 4 * bb);
  kv.release(a.seq);
  budget.set_reclaimer(MemPool::MmCache, {});
}

TEST(PagedKvBudget, GivesBackCachedBlocksButNeverLiveOnes) {
  const FakeModel fm;
  const size_t bb = block_bytes(fm, KvType::Int8Fp8, 8);
  MemoryBudget budget(12 * bb);
  KvConfig c = small_config(fm, KvType::Int8Fp8, 8, 12);
  c.budget = &budget;
  PagedKv kv(c);
  Conv old(fm, tokens(4, 48)), live(fm, tokens(5, 80)), fresh(fm, tokens(5, 80));
  run_conv(kv, fm, old, 48);
  kv.release(old.seq);  // 6 cached blocks
  live.seq = kv.create();
  while (live.pos < 48) run_step(kv, fm, {{&live, 16}});  // 6 of its 10 blocks so far
  EXPECT_EQ(budget.used(MemPool::Kv), 12 * bb);
  // Image rows need the whole budget: only the 6 cached blocks can go.
  EXPECT_FALSE(budget.charge(MemPool::MmRequests, 12 * bb, {MemPool::Kv}));
  EXPECT_EQ(budget.used(MemPool::Kv), 6 * bb);
  EXPECT_TRUE(budget.charge(MemPool::MmRequests, 4 * bb, {MemPool::Kv}));
  // The live sequence's KV is intact: it goes on and matches a fresh run.
  budget.uncharge(MemPool::MmRequests, 4 * bb);
  while (live.pos < 80) run_step(kv, fm, {{&live, 16}});
  kv.release(live.seq);
  kv.check_invariants();
  PagedKv other(small_config(fm, KvType::Int8Fp8, 8, 64));
  run_conv(other, fm, fresh, 16, false);
  EXPECT_TRUE(same_outputs(fm, live, fresh, 0, 80));
}

TEST(PagedKvBudget, GivenBackBlocksGoToFlashAndAreFoundAgain) {
  const FakeModel fm;
  const size_t bb = block_bytes(fm, KvType::Int8Fp8, 8);
  TempDir dir("budget");
  KvConfig c = flash_config(fm, KvType::Int8Fp8, 8, 8, 8, 1, dir.path, 32);
  MemoryBudget budget(c.dram_bytes);
  c.budget = &budget;
  PagedKv kv(c);
  const size_t staging = budget.used(MemPool::Kv);
  EXPECT_GT(staging, 0u);  // the staging buffers are charged at start
  Conv a(fm, tokens(6, 40));
  run_conv(kv, fm, a, 40);
  kv.release(a.seq);
  ASSERT_EQ(budget.used(MemPool::Kv), staging + 5 * bb);  // 5 full blocks, cached
  ASSERT_TRUE(budget.charge(MemPool::MmRequests, budget.free() + 5 * bb, {MemPool::Kv}));
  EXPECT_EQ(budget.used(MemPool::Kv), staging);
  EXPECT_EQ(kv.stats().blocks_evicted_to_flash, 5);
  budget.uncharge(MemPool::MmRequests, budget.used(MemPool::MmRequests));
  std::vector<int32_t> turn2 = a.toks;
  turn2.push_back(9);
  Conv a2(fm, turn2), fresh(fm, turn2);
  EXPECT_EQ(run_conv(kv, fm, a2, 8), 40);
  EXPECT_EQ(kv.stats().hits_flash, 5);
  kv.check_invariants();
  PagedKv other(small_config(fm, KvType::Int8Fp8, 8, 64));
  run_conv(other, fm, fresh, 8, false);
  EXPECT_TRUE(same_outputs(fm, a2, fresh, 40, 41));
}

}  // namespace
}  // namespace tern::kv::test

namespace tern::kv::test {
namespace {

// Frames are not page-aligned: giving one back to the OS must not touch its
// neighbours. The first frame (at the arena's aligned start) is freed while
// the next one holds a live sequence's KV, which must stay intact.
TEST(PagedKvBudget, AFreedFrameLeavesItsNeighboursIntact) {
  const FakeModel fm;
  const size_t bb = block_bytes(fm, KvType::Int8Fp8, 8);
  ASSERT_NE(bb % 4096, 0u) << "the premise: frames straddle pages";
  MemoryBudget budget(64 * bb);
  KvConfig c = small_config(fm, KvType::Int8Fp8, 8, 64);
  c.budget = &budget;
  PagedKv kv(c), plain(small_config(fm, KvType::Int8Fp8, 8, 64));
  Conv a(fm, tokens(100, 5)), b(fm, tokens(101, 40)), ref(fm, tokens(101, 40));
  a.seq = kv.create();
  run_step(kv, fm, {{&a, 5}});  // frame 0, a partial block
  b.seq = kv.create();
  run_step(kv, fm, {{&b, 6}});  // the next frames
  kv.release(a.seq);            // frame 0 goes back (to the budget and the OS)
  while (b.pos < 40) run_step(kv, fm, {{&b, std::min(6, 40 - b.pos)}});
  run_conv(plain, fm, ref, 40, false);
  EXPECT_TRUE(same_outputs(fm, b, ref, 0, 40));
  kv.check_invariants();
}

}  // namespace
}  // namespace tern::kv::test
