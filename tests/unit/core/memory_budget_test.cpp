#include "tern/core/memory_budget.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace tern {
namespace {

TEST(MemoryBudget, ChargesFitOrAreRefused) {
  MemoryBudget b(1000);
  EXPECT_TRUE(b.try_charge(MemPool::Kv, 600));
  EXPECT_TRUE(b.try_charge(MemPool::MmCache, 400));
  EXPECT_EQ(b.free(), 0u);
  EXPECT_FALSE(b.try_charge(MemPool::MmRequests, 1));
  EXPECT_EQ(b.used(MemPool::MmRequests), 0u);
  b.uncharge(MemPool::Kv, 100);
  EXPECT_EQ(b.used(), 900u);
  EXPECT_TRUE(b.try_charge(MemPool::MmRequests, 100));
  const MemoryBudgetStats s = b.stats();
  EXPECT_EQ(s.used[int(MemPool::Kv)], 500u);
  EXPECT_EQ(s.peak[int(MemPool::Kv)], 600u);
  EXPECT_EQ(s.peak_all, 1000u);
  EXPECT_EQ(s.refused, 1u);
  EXPECT_STREQ(mem_pool_name(MemPool::MmCache), "mm_cache");
}

// A pool's own limit refuses charges the total would allow, without asking
// any reclaimer (no other pool's bytes would help); force_charge ignores it.
TEST(MemoryBudget, APoolLimitCapsThatPoolAlone) {
  MemoryBudget b(1000);
  b.set_limit(MemPool::MmPixels, 300);
  EXPECT_EQ(b.limit(MemPool::MmPixels), 300u);
  EXPECT_EQ(b.limit(MemPool::Kv), SIZE_MAX);
  ASSERT_TRUE(b.try_charge(MemPool::MmCache, 500));
  int asked = 0;
  b.set_reclaimer(MemPool::MmCache, [&](size_t want) {
    asked += 1;
    b.uncharge(MemPool::MmCache, want);
    return want;
  });
  EXPECT_TRUE(b.charge(MemPool::MmPixels, 200, {MemPool::MmCache}));
  EXPECT_FALSE(b.charge(MemPool::MmPixels, 101, {MemPool::MmCache}));
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(b.used(MemPool::MmCache), 500u);
  EXPECT_TRUE(b.try_charge(MemPool::MmPixels, 100));
  EXPECT_TRUE(b.try_charge(MemPool::Kv, 200));  // other pools are not limited by it
  b.force_charge(MemPool::MmPixels, 50);
  EXPECT_EQ(b.used(MemPool::MmPixels), 350u);
  EXPECT_STREQ(mem_pool_name(MemPool::MmPixels), "mm_pixels");
}

TEST(MemoryBudget, ChargesSplitAndMerge) {
  MemoryBudget b(1000);
  ASSERT_TRUE(b.try_charge(MemPool::MmPixels, 600));
  MemoryCharge whole(&b, MemPool::MmPixels, 600);
  {
    MemoryCharge part = whole.split(250);
    EXPECT_EQ(part.bytes(), 250u);
    EXPECT_EQ(whole.bytes(), 350u);
    EXPECT_EQ(whole.split(5000).bytes(), 350u);  // at most what it holds; dropped at once
    EXPECT_EQ(b.used(MemPool::MmPixels), 250u);
    EXPECT_EQ(whole.bytes(), 0u);
    whole.merge(std::move(part));
    EXPECT_EQ(part.bytes(), 0u);
  }
  EXPECT_EQ(b.used(MemPool::MmPixels), 250u);  // whole holds it now
  ASSERT_TRUE(b.try_charge(MemPool::MmPixels, 50));
  whole.merge(MemoryCharge(&b, MemPool::MmPixels, 50));
  EXPECT_EQ(whole.bytes(), 300u);
  whole.reset();
  EXPECT_EQ(b.used(MemPool::MmPixels), 0u);
  EXPECT_EQ(MemoryCharge().split(10).bytes(), 0u);
}

TEST(MemoryBudget, ChargeAsksReclaimersInOrderForWhatIsMissing) {
  MemoryBudget b(1000);
  ASSERT_TRUE(b.try_charge(MemPool::MmCache, 500));
  ASSERT_TRUE(b.try_charge(MemPool::Kv, 400));
  std::vector<std::pair<char, size_t>> asked;
  // The cache gives back at most 150, the KV whatever is asked.
  b.set_reclaimer(MemPool::MmCache, [&](size_t want) {
    asked.push_back({'c', want});
    const size_t n = std::min<size_t>(want, 150);
    b.uncharge(MemPool::MmCache, n);
    return n;
  });
  b.set_reclaimer(MemPool::Kv, [&](size_t want) {
    asked.push_back({'k', want});
    b.uncharge(MemPool::Kv, want);
    return want;
  });
  EXPECT_EQ(b.reachable({MemPool::MmCache}), 100u + 500u);
  EXPECT_EQ(b.reachable({MemPool::MmCache, MemPool::Kv}), 1000u);
  ASSERT_TRUE(b.charge(MemPool::MmRequests, 300, {MemPool::MmCache, MemPool::Kv}));
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0], std::make_pair('c', size_t(200)));  // 100 were free
  EXPECT_EQ(asked[1], std::make_pair('k', size_t(50)));   // the cache gave 150
  EXPECT_EQ(b.used(MemPool::MmCache), 350u);
  EXPECT_EQ(b.used(MemPool::Kv), 350u);
  EXPECT_EQ(b.used(MemPool::MmRequests), 300u);
  EXPECT_EQ(b.stats().reclaimed[int(MemPool::MmCache)], 150u);
  // A pool not named in `from` is never asked; then nothing is taken.
  asked.clear();
  EXPECT_FALSE(b.charge(MemPool::MmRequests, 100, {}));
  EXPECT_TRUE(asked.empty());
  EXPECT_EQ(b.used(MemPool::MmRequests), 300u);
  // More than the whole budget: refused after asking, nothing taken.
  EXPECT_FALSE(b.charge(MemPool::MmRequests, 2000, {MemPool::MmCache}));
  EXPECT_EQ(b.used(MemPool::MmRequests), 300u);
  b.set_reclaimer(MemPool::MmCache, {});
  b.set_reclaimer(MemPool::Kv, {});
  EXPECT_EQ(b.reachable({MemPool::MmCache, MemPool::Kv}), b.free());
}

TEST(MemoryBudget, ForcedChargesShowInThePeakAndChargesEndWithTheirOwner) {
  MemoryBudget b(100);
  {
    b.force_charge(MemPool::MmRequests, 80);
    MemoryCharge c(&b, MemPool::MmRequests, 80);  // owns what was charged
    b.force_charge(MemPool::Kv, 50);
    EXPECT_EQ(b.used(), 130u);
    EXPECT_EQ(b.free(), 0u);
    EXPECT_EQ(b.stats().peak_all, 130u);
    MemoryCharge moved = std::move(c);
    EXPECT_EQ(c.bytes(), 0u);
    EXPECT_EQ(moved.bytes(), 80u);
    EXPECT_EQ(b.used(MemPool::MmRequests), 80u);
  }
  EXPECT_EQ(b.used(MemPool::MmRequests), 0u);
  EXPECT_EQ(b.used(MemPool::Kv), 50u);
}

TEST(MemoryBudget, ConcurrentChargesNeverExceedTheTotal) {
  MemoryBudget b(64 * 100);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&b, t] {
      const MemPool p = MemPool(t % kMemPools);
      for (int i = 0; i < 20000; ++i)
        if (b.try_charge(p, 64)) b.uncharge(p, 64);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(b.used(), 0u);
  EXPECT_LE(b.stats().peak_all, b.total());
}

}  // namespace
}  // namespace tern
