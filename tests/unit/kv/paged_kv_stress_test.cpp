// Random walks over PagedKv: conversations with shared prefixes start, run in
// mixed batches with random chunk sizes, get preempted (released and later
// restarted through the prefix cache) when the pool is full, and finish;
// DRAM is small, the flash tier on or off. After every operation all
// bookkeeping is recounted, and every output any conversation computed must
// equal, bit for bit, that of the same tokens run alone in a large cache.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kv_test_util.h"

namespace tern::kv {
namespace {

using namespace test;

struct Walk {
  FakeModel fm;
  KvType type;
  int B;
  std::mt19937 rng;
  std::map<std::vector<int32_t>, Conv> refs;

  const Conv& reference(const std::vector<int32_t>& toks) {
    auto it = refs.find(toks);
    if (it != refs.end()) return it->second;
    PagedKv big(small_config(fm, type, B, size_t(200 / B + 8)));
    Conv c(fm, toks);
    run_conv(big, fm, c, 17, false);
    return refs.emplace(toks, std::move(c)).first->second;
  }

  void check_outputs(const Conv& c) {
    const Conv& ref = reference(c.toks);
    for (int p = 0; p < int(c.toks.size()); ++p) {
      if (!c.have[size_t(p) * fm.n_layers]) continue;
      ASSERT_TRUE(same_outputs(fm, c, ref, p, p + 1)) << "position " << p;
    }
  }
};

void random_walk(uint32_t seed, bool flash) {
  Walk w{FakeModel{},
         KvType(seed % 4),
         std::array<int, 3>{1, 4, 8}[seed / 4 % 3],
         std::mt19937(seed),
         {}};
  auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(w.rng); };
  const int max_len = 90, need = (max_len + w.B - 1) / w.B + 1;
  TempDir dir("walk" + std::to_string(seed));
  KvConfig cfg;
  if (flash) {
    const int frames = std::max(3, need / 3 + rnd(0, need / 3));
    cfg = flash_config(w.fm, w.type, w.B, size_t(frames), need, rnd(0, 2), dir.path,
                       size_t(need + rnd(0, 2 * need)));
  } else {
    cfg = small_config(w.fm, w.type, w.B, size_t(need + rnd(0, 2 * need)));
  }
  cfg.max_seqs = 6;
  PagedKv kv(cfg);
  std::vector<std::vector<int32_t>> bases;
  for (int i = 0; i < 3; ++i) bases.push_back(tokens(1000 + seed * 10 + uint64_t(i), rnd(5, 40)));
  std::vector<std::unique_ptr<Conv>> waiting, active;
  int finished = 0;
  for (int op = 0; op < 300 && finished < 25; ++op) {
    if (waiting.size() < 3) {
      std::vector<int32_t> t = rnd(0, 3) < 3 ? bases[size_t(rnd(0, 2))] : std::vector<int32_t>{};
      for (int32_t x : tokens(seed * 7919u + uint64_t(op), rnd(1, max_len - int(t.size()))))
        t.push_back(x);
      waiting.push_back(std::make_unique<Conv>(w.fm, t));
    }
    const int what = rnd(0, 9);
    if (what < 2 && !waiting.empty() && kv.free_seq_slots() > 0) {
      auto c = std::move(waiting.front());
      waiting.erase(waiting.begin());
      c->seq = kv.create();
      c->pos = kv.attach_prefix(c->seq, c->toks);
      active.push_back(std::move(c));
    } else if (!active.empty()) {
      std::vector<Job> jobs;
      for (auto& c : active) {
        if (rnd(0, 3) == 0) continue;
        jobs.push_back({c.get(), std::min(rnd(1, 12), int(c->toks.size()) - c->pos)});
      }
      if (jobs.empty())
        jobs.push_back({active.back().get(),
                        std::min(3, int(active.back()->toks.size()) - active.back()->pos)});
      try {
        run_step(kv, w.fm, jobs);
      } catch (const KvFullError&) {
        ASSERT_GT(active.size(), 1u) << "a lone conversation must always fit";
        // Preempt the newest: release it; it restarts later through the cache.
        auto c = std::move(active.back());
        active.pop_back();
        kv.release(c->seq);
        c->pos = 0;
        waiting.insert(waiting.begin(), std::move(c));
      }
      for (size_t i = 0; i < active.size();) {
        Conv& c = *active[i];
        ASSERT_TRUE(kv.failure(c.seq).empty());
        if (c.pos < int(c.toks.size())) {
          ++i;
          continue;
        }
        w.check_outputs(c);
        kv.release(c.seq);
        active.erase(active.begin() + long(i));
        finished += 1;
      }
    }
    kv.check_invariants();
  }
  EXPECT_GE(finished, 5);
  const KvStats st = kv.stats();
  EXPECT_GT(st.hits_dram + st.hits_flash, 0);
  for (auto& c : active) w.check_outputs(*c);
}

TEST(PagedKvStress, RandomWalksInDram) {
  for (uint32_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    random_walk(seed, false);
  }
}

TEST(PagedKvStress, RandomWalksWithFlash) {
  for (uint32_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    random_walk(seed, true);
  }
}

}  // namespace
}  // namespace tern::kv
