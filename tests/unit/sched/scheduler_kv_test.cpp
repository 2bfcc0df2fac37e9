// The scheduler over the KV memory hierarchy, with the real engine on the
// generated tiny model (tiny_engine.h: one token a byte, 13 KV blocks in
// 1 MiB), so these always run:
//  * a prompt sharing full blocks with an earlier one reuses their KV, says
//    so in its timings, and produces the same greedy text;
//  * under KV pressure the newest sequence is preempted and later resumed,
//    and every request still produces its solo greedy text;
//  * with a flash tier, the same holds while blocks spill; an injected read
//    fault is recomputed (or fails only that request).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "collector.h"
#include "tern/engine/engine.h"
#include "tern/kv/paged_kv.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

using testutil::Collector;

// A shared system prompt of 138 tokens (one a byte: four full blocks of 32),
// then a per-request question.
std::string system_prompt() {
  return "You are a careful assistant for a small library. "
         "Rule 1: answer briefly, cite the shelf number when you know it, and never invent a "
         "book. ";
}

const char* const kQuestions[] = {
    "Where are the atlases?", "Do you have poetry?",    "When do you open?",
    "Can I renew a book?",    "Is there a quiet room?", "Who wrote Hamlet?",
};
constexpr int kQ = 6;

struct Outcome {
  std::string text;
  Finish finish;
};

class SchedulerKvTest : public ::testing::Test {
 protected:
  static std::unique_ptr<Engine> load(size_t dram_mb, size_t flash_mb, const std::string& dir = {},
                                      int max_seqs = 8) {
    EngineOptions o;
    o.model_path = testutil::tiny_model_path();
    o.n_ctx = 512;
    o.max_seqs = max_seqs;
    o.kv_dram_mb = dram_mb;
    o.kv_flash_mb = flash_mb;
    o.kv_flash_dir = dir;
    return Engine::load(o);
  }

  static Request request(Engine& e, const std::string& id, const std::string& text, int max_tokens,
                         const Collector& c) {
    Request r;
    r.id = id;
    r.prompt = e.tokenizer().encode(text, true, false);
    r.params.temperature = 0;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos =
        true;  // a random model may sample EOS anywhere: every run has its full length
    r.stream = c.stream();
    return r;
  }

  // Runs the prompts concurrently (all submitted before the scheduler starts).
  static std::vector<Outcome> run_all(Engine& e, const std::vector<std::string>& prompts,
                                      int max_tokens, SchedulerOptions so, Metrics& m) {
    Scheduler s(e, so, m);
    std::vector<std::unique_ptr<Collector>> cs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      cs.push_back(std::make_unique<Collector>());
      EXPECT_EQ(s.submit(request(e, "r" + std::to_string(i), prompts[i], max_tokens, *cs.back())),
                SubmitStatus::Accepted);
    }
    s.start();
    std::vector<Outcome> out;
    for (auto& c : cs) {
      Finish f = c->wait();
      out.push_back({c->text(), f});
    }
    return out;
  }

  // Each prompt alone on a roomy engine: the reference texts.
  static std::vector<std::string> solo_texts(const std::vector<std::string>& ps, int max_tokens) {
    auto big = load(256, 0);
    Metrics m;
    std::vector<std::string> out;
    for (const auto& p : ps)
      out.push_back(run_all(*big, {p}, max_tokens, SchedulerOptions{1, 8, 64, 0}, m)[0].text);
    return out;
  }

  static std::vector<std::string> pressure_prompts() {  // sharing no block
    std::vector<std::string> ps;
    for (int i = 0; i < kQ; ++i) ps.push_back(std::string(kQuestions[i]) + " " + system_prompt());
    return ps;
  }

  static std::vector<std::string> prompts() {
    std::vector<std::string> p;
    for (const char* q : kQuestions) p.push_back(system_prompt() + "Question: " + q + " Answer:");
    return p;
  }
};

TEST_F(SchedulerKvTest, SharedPrefixIsReusedWithIdenticalOutput) {
  auto e = load(256, 0);
  Metrics m;
  const auto ps = prompts();
  // Cold: one at a time on a fresh engine would also hit the cache from the
  // second request on, so the reference is a fresh engine per prompt.
  std::vector<Outcome> cold;
  for (const auto& p : ps) {
    auto fresh = load(256, 0);
    cold.push_back(run_all(*fresh, {p}, 16, SchedulerOptions{1, 8, 64, 0}, m)[0]);
    EXPECT_EQ(cold.back().finish.usage.cached_tokens, 0);
  }
  // Warm: the first request fills the cache, the rest reuse the shared blocks.
  const auto first = run_all(*e, {ps[0]}, 16, SchedulerOptions{4, 8, 64, 0}, m);
  EXPECT_EQ(first[0].text, cold[0].text);
  std::vector<std::string> rest(ps.begin() + 1, ps.end());
  const auto warm = run_all(*e, rest, 16, SchedulerOptions{4, 8, 64, 0}, m);
  const int shared = int(e->tokenizer().encode(system_prompt(), true, false).size()) / 32 * 32;
  ASSERT_GE(shared, 96);
  for (size_t i = 0; i < warm.size(); ++i) {
    EXPECT_EQ(warm[i].text, cold[i + 1].text) << kQuestions[i + 1];
    const Finish& f = warm[i].finish;
    EXPECT_NE(f.reason, FinishReason::Error) << f.error;
    EXPECT_GE(f.usage.cached_tokens, shared - 32) << kQuestions[i + 1];
    EXPECT_EQ(f.timings.cache_n, f.usage.cached_tokens);
    EXPECT_EQ(f.timings.cache_dram_n, f.timings.cache_n);
    EXPECT_EQ(f.timings.cache_flash_n, 0);
    EXPECT_EQ(f.timings.prompt_n + f.timings.cache_n, f.usage.prompt_tokens);
  }
  // The same prompt again: everything but the last partial block is reused.
  const auto again = run_all(*e, {ps[2]}, 16, SchedulerOptions{4, 8, 64, 0}, m);
  EXPECT_EQ(again[0].text, cold[2].text);
  EXPECT_GE(again[0].finish.usage.cached_tokens, again[0].finish.usage.prompt_tokens - 32);
  const kv::KvStats st = e->kv().stats();
  EXPECT_GT(st.hits_dram, 0);
  e->kv().check_invariants();
}

// 1 MiB of DRAM KV is 13 blocks of 32 tokens (int8-fp8: 78,336 bytes a
// block) for 6 sequences of ~220 tokens (~160 prompt + 60 generated; the
// prompts share no blocks: each starts differently), 7 blocks each: two fit
// at admission, and growing past 13 blocks preempts the newer one. Every
// text still equals its solo run on a roomy engine.
TEST_F(SchedulerKvTest, PreemptionUnderKvPressureKeepsOutputs) {
  const std::vector<std::string> ps = pressure_prompts();
  Metrics m;
  const std::vector<std::string> solo = solo_texts(ps, 60);
  auto e = load(1, 0);
  ASSERT_EQ(e->kv().stats().dram_blocks, 13);
  Metrics pm;
  const auto runs = run_all(*e, ps, 60, SchedulerOptions{6, 8, 64, 0}, pm);
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].finish.reason, FinishReason::Length) << runs[i].finish.error;
    EXPECT_EQ(runs[i].text, solo[i]) << kQuestions[i];
  }
  EXPECT_GT(pm.preemptions.load(), 0u);
  EXPECT_EQ(pm.preempted.load(), 0);
  e->kv().check_invariants();
}

// The same pressure with a flash tier: cold blocks spill to the file and are
// streamed back during attention instead of being recomputed; the texts are
// unchanged. Then a flash read fault breaks one request's KV: it is
// recomputed, and the server-side state stays consistent.
TEST_F(SchedulerKvTest, SpillingToFlashKeepsOutputsAndSurvivesReadFaults) {
  const std::vector<std::string> ps = pressure_prompts();
  Metrics m;
  const std::vector<std::string> solo = solo_texts(ps, 60);
  const auto dir =
      std::filesystem::temp_directory_path() / ("tern-sched-kv-" + std::to_string(::getpid()));
  {
    auto e = load(1, 64, dir.string());
    Metrics fm;
    const auto runs = run_all(*e, ps, 60, SchedulerOptions{6, 8, 64, 0}, fm);
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_EQ(runs[i].finish.reason, FinishReason::Length) << runs[i].finish.error;
      EXPECT_EQ(runs[i].text, solo[i]) << kQuestions[i];
    }
    const kv::KvStats st = e->kv().stats();
    EXPECT_GT(st.blocks_spilled + st.blocks_evicted_to_flash, 0);
    EXPECT_GT(st.bytes_prefetched + st.bytes_reloaded, 0);
    e->kv().check_invariants();

    // Every flash read fails from now on: requests needing spilled KV are
    // recomputed once and then fail with the I/O error; the rest finish.
    e->kv().inject_flash_fault(kv::IoKind::Read, 1 << 30, EIO);
    Metrics xm;
    const auto faulty = run_all(*e, ps, 60, SchedulerOptions{6, 8, 64, 0}, xm);
    int failed = 0;
    for (size_t i = 0; i < faulty.size(); ++i) {
      if (faulty[i].finish.reason == FinishReason::Error) {
        ++failed;
        EXPECT_NE(faulty[i].finish.error.find("KV flash tier"), std::string::npos)
            << faulty[i].finish.error;
      } else {
        EXPECT_EQ(faulty[i].text, solo[i]) << kQuestions[i];
      }
    }
    std::printf("with every flash read failing: %d of %d requests failed, %llu KV I/O failures\n",
                failed, kQ, (unsigned long long)xm.kv_io_failures.load());
    e->kv().check_invariants();
    // The fault cleared, the engine serves normally.
    e->kv().inject_flash_fault(kv::IoKind::Read, 0, EIO);
    const auto after = run_all(*e, {ps[0]}, 60, SchedulerOptions{6, 8, 64, 0}, m);
    EXPECT_EQ(after[0].text, solo[0]);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tern::sched
