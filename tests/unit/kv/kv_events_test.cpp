// Prefix-index events (kv_events.h): every registered block is reported as
// stored, chained to its parent, with its tokens; a block leaving the index
// (evicted with no flash tier) as removed; restored blocks as stored; and
// the ring reports what a slow reader lost.
#include "tern/kv/kv_events.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "kv_test_util.h"
#include "tern/kv/kv_persist.h"

namespace tern::kv {
namespace {

using namespace test;

TEST(KvEvents, StoredChainsAndRemovedOnEviction) {
  const FakeModel fm;
  KvEventLog log(1024, 8);
  PagedKv kv(small_config(fm, KvType::Int8Fp8, 8, 6));  // room for 6 blocks, no flash
  kv.set_event_sink(&log);
  Conv a(fm, tokens(1, 40));  // 5 full blocks
  run_conv(kv, fm, a, 16);
  kv.release(a.seq);
  auto ev = log.read(0, 100, nullptr);
  ASSERT_EQ(ev.size(), 5u);
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].kind, KvEventKind::Stored);
    EXPECT_EQ(ev[i].seq, i + 1);
    EXPECT_EQ(ev[i].tokens, std::vector<int32_t>(a.toks.begin() + ptrdiff_t(8 * i),
                                                 a.toks.begin() + ptrdiff_t(8 * i + 8)));
    if (i > 0) EXPECT_EQ(ev[i].parent, ev[i - 1].hash);
  }
  Conv b(fm, tokens(2, 40));  // needs the frames a's cached blocks hold
  run_conv(kv, fm, b, 16);
  std::map<KvEventKind, int> n;
  for (const auto& e : log.read(5, 100, nullptr)) n[e.kind] += 1;
  EXPECT_EQ(n[KvEventKind::Stored], 5);
  EXPECT_GE(n[KvEventKind::Removed], 4);
  uint64_t lost = 0;
  KvEventLog small(4, 8);
  for (int i = 0; i < 10; ++i) small.on_event({KvEventKind::Removed, false, {}, {}, {}});
  EXPECT_EQ(small.read(0, 100, &lost).size(), 4u);
  EXPECT_EQ(lost, 6u);
  EXPECT_EQ(small.last_seq(), 10u);
}

// A reader at or past the last event gets nothing; the largest event number
// must not wrap around to "everything".
TEST(KvEvents, ReadingAfterTheLastEventReturnsNothing) {
  KvEventLog log(4, 8);
  for (int i = 0; i < 3; ++i) log.on_event({KvEventKind::Removed, false, {}, {}, {}});
  uint64_t lost = 99;
  EXPECT_TRUE(log.read(3, 100, &lost).empty());
  EXPECT_EQ(lost, 0u);
  EXPECT_TRUE(log.read(7, 100, &lost).empty());
  EXPECT_TRUE(log.read(std::numeric_limits<uint64_t>::max(), 100, &lost).empty());
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(log.read(2, 100, &lost).size(), 1u);
}

}  // namespace
}  // namespace tern::kv
