// The open-addressing prefix index against std::map under random inserts and
// erases, with keys crafted to collide so long probe runs and backward-shift
// deletion across the table's wrap-around are exercised.
#include "tern/kv/prefix_index.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

namespace tern::kv {
namespace {

BlockHash key(uint64_t home, uint64_t tag) {
  BlockHash k{};
  std::memcpy(k.data(), &home, 8);
  std::memcpy(k.data() + 8, &tag, 8);
  return k;
}

TEST(PrefixIndex, MatchesMapUnderCollidingChurn) {
  PrefixIndex idx(40);  // 128 slots
  std::map<BlockHash, int32_t> ref;
  std::mt19937_64 rng(3);
  for (int step = 0; step < 200000; ++step) {
    // Homes cluster near the end of the table so runs wrap around.
    const BlockHash k = key(120 + rng() % 12, rng() % 64);
    const int op = int(rng() % 3);
    if (op == 0) {
      const bool want = ref.size() < 40 && !ref.count(k);
      const int32_t id = int32_t(step);
      ASSERT_EQ(idx.insert(k, id), want);
      if (want) ref[k] = id;
    } else if (op == 1) {
      ASSERT_EQ(idx.erase(k), ref.erase(k) == 1);
    } else {
      const auto it = ref.find(k);
      ASSERT_EQ(idx.find(k), it == ref.end() ? -1 : it->second);
    }
    ASSERT_EQ(idx.size(), ref.size());
  }
  for (const auto& [k, id] : ref) EXPECT_EQ(idx.find(k), id);
}

TEST(PrefixIndex, RefusesDuplicatesAndOverflow) {
  PrefixIndex idx(2);
  EXPECT_TRUE(idx.insert(key(1, 1), 7));
  EXPECT_FALSE(idx.insert(key(1, 1), 8));
  EXPECT_EQ(idx.find(key(1, 1)), 7);
  EXPECT_TRUE(idx.insert(key(1, 2), 9));
  EXPECT_FALSE(idx.insert(key(5, 5), 10));  // full
  EXPECT_TRUE(idx.erase(key(1, 1)));
  EXPECT_EQ(idx.find(key(1, 2)), 9);
  EXPECT_FALSE(idx.erase(key(1, 1)));
}

}  // namespace
}  // namespace tern::kv
