// The embedding cache under the one memory budget (core/memory_budget.h):
// its DRAM entries are charged to MemPool::MmCache, it evicts its own LRU
// entries to fit, gives bytes back when another pool asks, and keeps finding
// evicted entries on its flash tier.
#include <gtest/gtest.h>

#include "media_test_util.h"
#include "tern/core/memory_budget.h"
#include "tern/vision/embedding_cache.h"

namespace tern::vision::testing {
namespace {

EmbeddingKey key(int i) {
  EmbeddingKey k;
  k.pixels = sha256("budget picture " + std::to_string(i));
  k.projector = sha256("projector");
  k.preprocess = sha256("preprocess");
  return k;
}
Embeddings rows(int i) {
  Embeddings e{4, 64, std::vector<float>(4 * 64)};
  for (size_t j = 0; j < e.data.size(); ++j) e.data[j] = float(i) - float(j) * 0.5f;
  return e;
}
constexpr size_t kRowBytes = 4 * 64 * sizeof(float);

TEST(EmbeddingCacheBudget, EntriesAreChargedAndTheCacheEvictsItsOwnToFit) {
  MemoryBudget budget(3 * kRowBytes);
  {
    EmbeddingCache cache({.dram_bytes = 10 * kRowBytes, .budget = &budget});
    for (int i = 0; i < 8; ++i) {
      cache.insert(key(i), rows(i));
      EXPECT_LE(budget.used(), budget.total());
    }
    EXPECT_EQ(budget.used(MemPool::MmCache), 3 * kRowBytes);
    const EmbeddingCacheStats s = cache.stats();
    EXPECT_EQ(s.dram.entries, 3u);
    EXPECT_EQ(s.dram.evictions, 5u);
    EXPECT_NE(cache.find(key(7)), nullptr);
    EXPECT_EQ(cache.find(key(4)), nullptr);  // the oldest went first
    EXPECT_EQ(budget.stats().peak[int(MemPool::MmCache)], 3 * kRowBytes);
  }
  EXPECT_EQ(budget.used(), 0u);  // the cache gives its charge back when it goes
}

TEST(EmbeddingCacheBudget, OtherPoolsTakeRoomAndAnEntryWithNoRoomIsNotKept) {
  MemoryBudget budget(4 * kRowBytes);
  EmbeddingCache cache({.dram_bytes = 10 * kRowBytes, .budget = &budget});
  for (int i = 0; i < 4; ++i) cache.insert(key(i), rows(i));
  // KV needs three entries' worth: the cache's reclaimer evicts the oldest.
  ASSERT_TRUE(budget.charge(MemPool::Kv, 3 * kRowBytes, {MemPool::MmCache}));
  EXPECT_EQ(budget.used(MemPool::MmCache), kRowBytes);
  EXPECT_EQ(cache.stats().reclaimed_bytes, 3 * kRowBytes);
  EXPECT_NE(cache.find(key(3)), nullptr);
  EXPECT_EQ(cache.find(key(0)), nullptr);
  // Running requests' rows take the rest: a new entry finds no room, even
  // after evicting the cache's last one; the caller still gets its rows.
  ASSERT_TRUE(budget.charge(MemPool::MmRequests, kRowBytes, {MemPool::MmCache}));
  const auto e = cache.insert(key(9), rows(9));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->data, rows(9).data);
  EXPECT_EQ(cache.stats().not_kept, 1u);
  EXPECT_EQ(cache.stats().dram.entries, 0u);
  EXPECT_LE(budget.used(), budget.total());
}

TEST(EmbeddingCacheBudget, EvictedEntriesAreFoundOnFlashWithinTheBudget) {
  TempDir dir;
  MemoryBudget budget(2 * kRowBytes);
  EmbeddingCache cache(
      {.dram_bytes = 10 * kRowBytes, .flash_dir = dir.path().string(), .budget = &budget});
  for (int i = 0; i < 6; ++i) cache.insert(key(i), rows(i));
  for (int i = 0; i < 6; ++i) {
    const auto e = cache.find(key(i));
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->data, rows(i).data);
    EXPECT_LE(budget.used(), budget.total());
  }
  const EmbeddingCacheStats s = cache.stats();
  EXPECT_GE(s.flash.hits, 4u);
  EXPECT_EQ(s.flash.entries, 6u);
  EXPECT_EQ(budget.stats().peak_all, 2 * kRowBytes);
}

}  // namespace
}  // namespace tern::vision::testing
