// The DRAM-flash hybrid: live sequences larger than DRAM spill their cold
// blocks and stream them back layer by layer with outputs bit-identical to
// an all-DRAM run (every type, prefetch distances 0..2); evicted prefix-cache
// blocks are written out, found again by hash, reloaded or streamed; the
// spill file is removed with the cache.
#include <gtest/gtest.h>

#include "kv_test_util.h"

namespace tern::kv {
namespace {

using namespace test;

constexpr KvType kTypes[] = {KvType::F16, KvType::Int8, KvType::Int8Fp8, KvType::Int4Fp8};

TEST(PagedKvFlash, SpilledSequencesMatchAllDramRun) {
  const FakeModel fm;
  for (KvType t : kTypes) {
    for (int prefetch : {0, 1, 2}) {
      TempDir dir("spill");
      KvStats st;
      std::vector<Conv> convs;
      {
        PagedKv kv(flash_config(fm, t, 8, 16, 40, prefetch, dir.path, 64));
        for (int i = 0; i < 3; ++i) {
          convs.emplace_back(fm, tokens(20 + uint64_t(i), 120));
          convs.back().seq = kv.create();
        }
        // Prefill in chunks of 10, then decode-like single tokens, all three per step.
        for (int step = 0; convs[0].pos < 120; ++step) {
          std::vector<Job> jobs;
          for (Conv& c : convs) jobs.push_back({&c, c.pos < 60 ? 10 : 1 + step % 3});
          for (Job& j : jobs) j.n = std::min(j.n, 120 - j.c->pos);
          run_step(kv, fm, jobs);
          kv.check_invariants();
          if (kv.stats().flash_live > 0) st.flash_live = kv.stats().flash_live;
        }
        const KvStats end = kv.stats();
        st.blocks_spilled = end.blocks_spilled;
        st.bytes_prefetched = end.bytes_prefetched;
        EXPECT_EQ(dir.n_files(), 1u);
      }
      EXPECT_EQ(dir.n_files(), 0u) << "spill file removed on shutdown";
      EXPECT_GE(st.blocks_spilled, 45 - 16);
      EXPECT_GT(st.flash_live, 0);
      EXPECT_GT(st.bytes_prefetched, 0);
      for (Conv& c : convs) {
        PagedKv big(small_config(fm, t, 8, 64));
        Conv ref(fm, c.toks);
        run_conv(big, fm, ref, 10, false);
        EXPECT_TRUE(same_outputs(fm, c, ref, 0, 120)) << to_string(t) << " prefetch " << prefetch;
      }
    }
  }
}

// A's blocks are evicted to flash by X; a later turn of A finds them by
// hash: one is reloaded into a free frame, the rest are streamed.
TEST(PagedKvFlash, EvictedPrefixIsReloadedOrStreamedNotRecomputed) {
  const FakeModel fm;
  for (KvType t : kTypes) {
    TempDir dir("reload");
    PagedKv kv(flash_config(fm, t, 8, 6, 8, 1, dir.path, 32));
    Conv a(fm, tokens(30, 40)), x(fm, tokens(31, 38));
    run_conv(kv, fm, a, 40);
    kv.release(a.seq);
    run_conv(kv, fm, x, 38);  // 5 blocks: 1 free frame, 4 of a's evicted to flash
    EXPECT_EQ(kv.stats().blocks_evicted_to_flash, 4);
    kv.release(x.seq);  // x's partial block frees one frame
    std::vector<int32_t> turn2 = a.toks;
    for (int32_t tk : tokens(32, 9)) turn2.push_back(tk);
    Conv a2(fm, turn2), fresh(fm, turn2);
    EXPECT_EQ(run_conv(kv, fm, a2, 9), 40);
    const KvStats st = kv.stats();
    EXPECT_EQ(st.hits_dram, 1);
    EXPECT_EQ(st.hits_flash, 4);
    EXPECT_EQ(st.tokens_reused_flash, 32);
    EXPECT_EQ(st.bytes_reloaded, int64_t(kv.layout().block_bytes));  // one whole block reloaded
    EXPECT_GT(st.bytes_prefetched, 0);                               // three streamed
    kv.check_invariants();
    PagedKv other(small_config(fm, t, 8, 64));
    run_conv(other, fm, fresh, 9, false);
    EXPECT_TRUE(same_outputs(fm, a2, fresh, 40, 49)) << to_string(t);
  }
}

// Live blocks spilled while their sequence ran stay on flash as prefix cache
// after it ends and are reused by the next turn.
TEST(PagedKvFlash, SpilledBlocksOutliveTheirSequenceAsCache) {
  const FakeModel fm;
  TempDir dir("outlive");
  PagedKv kv(flash_config(fm, KvType::Int8Fp8, 8, 8, 16, 1, dir.path, 32));
  Conv a(fm, tokens(40, 96));
  run_conv(kv, fm, a, 8);  // 12 blocks through 8 frames
  EXPECT_GE(kv.stats().blocks_spilled, 4);
  kv.release(a.seq);
  EXPECT_GE(kv.stats().flash_cached, 4);
  std::vector<int32_t> turn2 = a.toks;
  turn2.push_back(7);
  Conv a2(fm, turn2), fresh(fm, turn2);
  EXPECT_EQ(run_conv(kv, fm, a2, 8), 96);
  EXPECT_GE(kv.stats().hits_flash, 4);
  kv.check_invariants();
  PagedKv other(small_config(fm, KvType::Int8Fp8, 8, 64));
  run_conv(other, fm, fresh, 8, false);
  EXPECT_TRUE(same_outputs(fm, a2, fresh, 96, 97));
}

// Once frames are free again, blocks that were being streamed are loaded
// back into DRAM between steps.
TEST(PagedKvFlash, StreamedBlocksReturnToDramWhenFramesFree) {
  const FakeModel fm;
  TempDir dir("promote");
  PagedKv kv(flash_config(fm, KvType::Int8Fp8, 8, 8, 16, 1, dir.path, 32));
  Conv a(fm, tokens(90, 80)), c(fm, tokens(91, 12));
  a.seq = kv.create();
  run_step(kv, fm, {{&a, 64}});
  c.seq = kv.create();
  run_step(kv, fm, {{&c, 12}, {&a, 1}});  // c's two blocks and a's 9th: three of a's spill
  EXPECT_EQ(kv.stats().flash_live, 3);
  kv.release(c.seq);            // c's partial block frees a frame (its full one stays cached)
  run_step(kv, fm, {{&a, 1}});  // streams a's blocks, then loads one back
  run_step(kv, fm, {{&a, 1}});
  const KvStats st = kv.stats();
  EXPECT_EQ(st.flash_live, 2);
  EXPECT_EQ(st.bytes_reloaded, int64_t(kv.layout().block_bytes));
  kv.check_invariants();
  run_step(kv, fm, {{&a, 13}});
  PagedKv big(small_config(fm, KvType::Int8Fp8, 8, 64));
  Conv ref(fm, a.toks);
  run_conv(big, fm, ref, 16, false);
  EXPECT_TRUE(same_outputs(fm, a, ref, 0, 80));
}

}  // namespace
}  // namespace tern::kv
