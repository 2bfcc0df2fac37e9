// The persistent prefix cache on a real (generated, tiny) engine: a snapshot
// taken from one engine and loaded into a freshly started one turns a
// repeated prompt into a prefix hit from flash with the same greedy tokens;
// the snapshot is refused by an engine with another KV type. And
// Scheduler::post, which runs the periodic snapshot on the engine thread.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "tern/engine/engine.h"
#include "tern/kv/kv_persist.h"
#include "tern/kv/paged_kv.h"
#include "tern/sched/metrics.h"
#include "tern/sched/scheduler.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

struct Dir {
  std::string path;
  explicit Dir(const std::string& name)
      : path((std::filesystem::temp_directory_path() /
              ("tern-cache-dir-test-" + std::to_string(::getpid()) + "-" + name))
                 .string()) {
    std::filesystem::remove_all(path);
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

std::unique_ptr<Engine> engine(const std::string& flash, kv::KvType type = kv::KvType::Int8Fp8) {
  EngineOptions o;
  o.model_path = testutil::tiny_model_path();
  o.n_ctx = 512;
  o.max_seqs = 4;
  o.kv_type = type;
  o.kv_dram_mb = 8;
  o.kv_flash_dir = flash;
  o.kv_flash_mb = 8;
  return Engine::load(o);
}

// Greedy tokens after the prompt, reusing its cached prefix; `reused` gets
// the tokens attach_prefix found.
std::vector<int32_t> run(Engine& e, const std::vector<int32_t>& prompt, int n, int* reused) {
  const SeqId seq = e.new_sequence();
  *reused = e.attach_prefix(seq, prompt);
  std::vector<int32_t> feed(prompt.begin() + *reused, prompt.end()), out;
  StepOutput logits;
  while (int(out.size()) < n) {
    Batch b;
    b.entries.push_back({seq, std::span<const int32_t>(feed), LogitsMode::Last});
    e.step(b, logits);
    const auto row = logits.last(0);
    out.push_back(int32_t(std::max_element(row.begin(), row.end()) - row.begin()));
    feed = {out.back()};
  }
  e.free_sequence(seq);
  return out;
}

std::vector<int32_t> prompt() {
  std::vector<int32_t> p;
  for (int i = 0; i < 150; ++i) p.push_back(3 + (i * 37) % 128);  // ASCII byte tokens
  return p;
}

TEST(CacheDir, SnapshotGivesAPrefixHitAfterRestart) {
  Dir cache("snap"), flash("snap-flash");
  std::vector<int32_t> first;
  int reused = 0;
  {
    auto e = engine(flash.path);
    first = run(*e, prompt(), 8, &reused);
    EXPECT_EQ(reused, 0);
    const auto st =
        kv::save_prefix_cache(e->kv(), cache.path, size_t(1) << 30,
                              std::chrono::steady_clock::now() + std::chrono::minutes(1));
    ASSERT_FALSE(st.failed) << st.message;
    EXPECT_GE(st.blocks, 4);
  }
  auto e = engine(flash.path);
  const auto st = kv::load_prefix_cache(e->kv(), cache.path);
  EXPECT_GE(st.blocks, 4) << st.message;
  EXPECT_EQ(run(*e, prompt(), 8, &reused), first);
  EXPECT_EQ(reused, 128);
  EXPECT_EQ(e->cache_stats().tokens_reused_flash, 128);
  e->kv().check_invariants();

  auto other = engine(flash.path, kv::KvType::Int4Fp8);
  const auto ig = kv::load_prefix_cache(other->kv(), cache.path);
  EXPECT_TRUE(ig.ignored);
  EXPECT_EQ(ig.blocks, 0);
}

TEST(CacheDir, PostRunsOnTheEngineThread) {
  Dir flash("post-flash");
  auto e = engine(flash.path);
  Metrics m;
  Scheduler s(*e, SchedulerOptions{}, m);
  s.start();
  std::promise<std::thread::id> ran;
  s.post([&] { ran.set_value(std::this_thread::get_id()); });
  auto f = ran.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
  s.stop();
}

}  // namespace
}  // namespace tern::sched
