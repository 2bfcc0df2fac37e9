// Steps that yield (issue 31, section 2): a forward pass paused between
// layers while another pass runs gives the same bits as one run straight
// through, and the scheduler uses it so that a short prompt arriving during
// a long prefill pass gets its first token before that pass ends.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "collector.h"
#include "tern/engine/engine.h"
#include "tern/kv/paged_kv.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

using testutil::Collector;

std::vector<int32_t> tokens_of(int n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = 3 + (i * 7 + salt * 13) % 128;
  return t;
}

// One plain step of `tokens` for seq: its last position's logits.
std::vector<float> step_last(Engine& e, SeqId seq, std::span<const int32_t> tokens) {
  StepOutput out;
  Batch b;
  b.entries.push_back({seq, tokens, LogitsMode::Last});
  e.step(b, out);
  return {out.last(0).begin(), out.last(0).end()};
}

std::unique_ptr<Engine> load_engine() {
  EngineOptions o = testutil::tiny_engine_options(1024, 8);
  o.prefix_reuse = false;
  return Engine::load(o);
}

// A's prefill pauses after block `at` (2l: layer l's attention, in one part
// at this length, 2l + 1 its FFN); B's prefill and one decode run in the
// pause; A resumes. Every logit equals the uninterrupted runs', and A's KV
// too (its next decode step's logits).
TEST(StepYield, APausedPassGivesTheBitsOfOneRunStraightThrough) {
  const auto a_prompt = tokens_of(300, 1), b_prompt = tokens_of(40, 2);
  for (int at : {0, 3, 6, 10}) {
    SCOPED_TRACE("paused after block " + std::to_string(at));
    // Straight through: A, then B, each alone.
    std::vector<float> a_ref, b_ref, a_next_ref;
    {
      const auto e = load_engine();
      const SeqId a = e->new_sequence(), b = e->new_sequence();
      a_ref = step_last(*e, a, a_prompt);
      b_ref = step_last(*e, b, b_prompt);
      a_next_ref = step_last(*e, a, std::vector<int32_t>{5});
    }
    const auto e = load_engine();
    const SeqId a = e->new_sequence(), b = e->new_sequence();
    StepOutput out_a, out_b;
    Batch ba;
    ba.entries.push_back({a, a_prompt, LogitsMode::Last});
    int asked = 0;
    int blocks = 0;
    const Engine::YieldCheck pause_at = [&](int block, int n_blocks) {
      ++asked;
      blocks = n_blocks;
      return block == at;
    };
    ASSERT_FALSE(e->step(ba, out_a, pause_at));
    EXPECT_TRUE(e->paused());
    EXPECT_TRUE(e->kv().suspended());
    // In the pause: another sequence gets room, prefills and decodes.
    ASSERT_EQ(e->reserve(b, int(b_prompt.size()) + 1).room, Engine::Room::Ok);
    Batch bb;
    bb.entries.push_back({b, b_prompt, LogitsMode::Last});
    e->step(bb, out_b);
    EXPECT_EQ(std::vector<float>(out_b.last(0).begin(), out_b.last(0).end()), b_ref);
    const std::vector<int32_t> b_next{9};
    Batch bn;
    bn.entries.push_back({b, b_next, LogitsMode::Last});
    e->step(bn, out_b);
    // A yielding pass cannot start while one is paused.
    EXPECT_THROW(e->step(bn, out_b, pause_at), InvalidArgument);
    const Engine::YieldCheck never = [&](int, int) {
      ++asked;
      return false;
    };
    ASSERT_TRUE(e->resume(ba, out_a, never));
    EXPECT_FALSE(e->paused());
    EXPECT_FALSE(e->kv().suspended());
    EXPECT_EQ(std::vector<float>(out_a.last(0).begin(), out_a.last(0).end()), a_ref);
    EXPECT_EQ(e->seq_len(a), int(a_prompt.size()));
    const std::vector<int32_t> next{5};
    Batch an;
    an.entries.push_back({a, next, LogitsMode::Last});
    e->step(an, out_a);
    EXPECT_EQ(std::vector<float>(out_a.last(0).begin(), out_a.last(0).end()), a_next_ref);
    // After every block but the last; a 300-token pass from position 0 has
    // its attention in one part: a layer is two blocks.
    EXPECT_EQ(blocks, 2 * e->config().n_layers);
    EXPECT_EQ(asked, blocks - 1);
  }
}

// A long chunk at depth cuts each layer's attention into parts (a pause
// point between them): pausing after any block, inside a layer's attention
// too, and more than once, gives the bits of one pass straight through
// (which runs the attention whole), and the same KV.
TEST(StepYield, APassPausedInsideALayersAttentionGivesTheSameBits) {
  const auto prefix = tokens_of(640, 8), chunk = tokens_of(256, 9);
  const std::vector<int32_t> next{7};
  std::vector<float> ref, next_ref;
  auto prefill = [&](Engine& e, SeqId a) {
    StepOutput out;
    Batch b;
    b.entries.push_back({a, prefix, LogitsMode::None});
    e.step(b, out);
  };
  {
    const auto e = load_engine();
    const SeqId a = e->new_sequence();
    prefill(*e, a);
    ref = step_last(*e, a, chunk);
    next_ref = step_last(*e, a, next);
  }
  int per_layer = 0;
  {  // how many blocks a layer is in this pass
    const auto e = load_engine();
    const SeqId a = e->new_sequence();
    prefill(*e, a);
    StepOutput out;
    Batch b;
    b.entries.push_back({a, chunk, LogitsMode::Last});
    int n = 0;
    ASSERT_TRUE(e->step(b, out, [&](int, int n_blocks) {
      n = n_blocks;
      return false;
    }));
    EXPECT_EQ(std::vector<float>(out.last(0).begin(), out.last(0).end()), ref);
    ASSERT_EQ(n % e->config().n_layers, 0);
    per_layer = n / e->config().n_layers;
  }
  ASSERT_GE(per_layer, 3);  // at least two attention parts, then the FFN
  // Pauses inside layer 0's and layer 2's attention, after an FFN, and twice.
  const std::vector<std::vector<int>> cases = {
      {0}, {1}, {per_layer - 2}, {per_layer - 1}, {2 * per_layer + 1}, {1, per_layer + 1}};
  for (const auto& at : cases) {
    SCOPED_TRACE("paused after block " + std::to_string(at.front()) + " (of " +
                 std::to_string(at.size()) + ")");
    const auto e = load_engine();
    const SeqId a = e->new_sequence(), b = e->new_sequence();
    prefill(*e, a);
    StepOutput out, out_b;
    Batch ba;
    ba.entries.push_back({a, chunk, LogitsMode::Last});
    size_t pauses = 0;
    const Engine::YieldCheck pause_at = [&](int block, int) {
      return pauses < at.size() && block == at[pauses];
    };
    bool done = e->step(ba, out, pause_at);
    while (!done) {
      ++pauses;
      // In the pause: another sequence prefills (its own layers' attention
      // whole) and decodes.
      if (pauses == 1) {
        const auto b_prompt = tokens_of(30, 10);
        ASSERT_EQ(e->reserve(b, int(b_prompt.size())).room, Engine::Room::Ok);
        Batch bb;
        bb.entries.push_back({b, b_prompt, LogitsMode::Last});
        e->step(bb, out_b);
      }
      ASSERT_EQ(e->reserve(b, 1).room, Engine::Room::Ok);
      Batch bn;
      bn.entries.push_back({b, next, LogitsMode::Last});
      e->step(bn, out_b);
      done = e->resume(ba, out, pause_at);
    }
    EXPECT_EQ(pauses, at.size());
    EXPECT_EQ(std::vector<float>(out.last(0).begin(), out.last(0).end()), ref);
    Batch an;
    an.entries.push_back({a, next, LogitsMode::Last});
    e->step(an, out);
    EXPECT_EQ(std::vector<float>(out.last(0).begin(), out.last(0).end()), next_ref);
  }
}

TEST(StepYield, ResumeWithoutAPausedPassIsAnError) {
  const auto e = load_engine();
  const SeqId a = e->new_sequence();
  const auto prompt = tokens_of(8, 3);
  Batch b;
  b.entries.push_back({a, prompt, LogitsMode::Last});
  StepOutput out;
  EXPECT_THROW(e->resume(b, out, [](int, int) { return false; }), InvalidArgument);
  EXPECT_THROW(e->kv().resume_step(), InvalidArgument);
}

// While a step is suspended, another sequence gets room only without
// spilling the live blocks the paused pass reads in place (cached blocks
// may still go); once the step ended, the same reservation spills one.
TEST(StepYield, NoLiveBlockSpillsWhileAStepIsSuspended) {
  EngineOptions o = testutil::tiny_engine_options(1024, 8);
  o.prefix_reuse = false;
  o.kv_dram_mb = 1;  // 13 blocks of 32 tokens
  o.kv_flash_mb = 64;
  o.kv_flash_dir = test::temp_path("yield-flash");
  const auto e = Engine::load(o);
  const SeqId a = e->new_sequence(), b = e->new_sequence();
  const auto a_prompt = tokens_of(12 * 32, 6), b_prompt = tokens_of(40, 7);
  const std::span<const int32_t> a_all(a_prompt);
  StepOutput out;
  // A's first 8 blocks are in (full: they could spill), its last 4 come in
  // the pass that pauses, reading the first 8 in place.
  Batch b1;
  b1.entries.push_back({a, a_all.first(8 * 32), LogitsMode::None});
  e->step(b1, out);
  ASSERT_EQ(e->reserve(a, 4 * 32).room, Engine::Room::Ok);
  Batch ba;
  ba.entries.push_back({a, a_all.subspan(8 * 32), LogitsMode::Last});
  ASSERT_FALSE(e->step(ba, out, [](int block, int) { return block == 1; }));
  // Two blocks for B: one is free, the other would spill one of A's first 8.
  EXPECT_LT(e->available_blocks(), 2);
  EXPECT_EQ(e->reserve(b, int(b_prompt.size())).room, Engine::Room::Full);
  ASSERT_TRUE(e->resume(ba, out, [](int, int) { return false; }));
  EXPECT_EQ(e->seq_len(a), int(a_prompt.size()));
  EXPECT_GE(e->available_blocks(), 2);  // A's full blocks may spill now
  EXPECT_EQ(e->reserve(b, int(b_prompt.size())).room, Engine::Room::Ok);
  EXPECT_GE(e->cache_stats().blocks_spilled, 1);
}

Request make_request(const Engine& e, const std::string& id, std::vector<int32_t> prompt,
                     int max_tokens, const Collector& c) {
  Request r;
  r.id = id;
  r.client = id;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.stream = c.stream();
  (void)e;
  return r;
}

// One long prompt in one pass (step_tokens covers it); a short request sent
// while that pass runs gets its first token first, in a pass of its own, and
// both texts equal their runs alone.
TEST(StepYield, AShortPromptArrivingDuringALongPassGoesFirst) {
  const auto e = load_engine();
  const auto long_prompt = tokens_of(1000, 4), short_prompt = tokens_of(12, 5);
  constexpr int kLongOut = 6, kShortOut = 4;
  std::string long_alone, short_alone;
  {
    Metrics m;
    SchedulerOptions o;
    o.max_batch = 4;
    o.step_tokens = 1024;
    o.yield_ms = 0;  // off: the reference
    Scheduler s(*e, o, m);
    s.start();
    Collector cl, cs;
    ASSERT_EQ(s.submit(make_request(*e, "long", long_prompt, kLongOut, cl)),
              SubmitStatus::Accepted);
    cl.wait();
    ASSERT_EQ(s.submit(make_request(*e, "short", short_prompt, kShortOut, cs)),
              SubmitStatus::Accepted);
    cs.wait();
    long_alone = cl.text();
    short_alone = cs.text();
  }
  Metrics m;
  SchedulerOptions o;
  o.max_batch = 4;
  o.step_tokens = 1024;
  o.yield_ms = 1e-6;  // any pass with layers left yields to an arrival
  Scheduler s(*e, o, m);
  s.start();
  Collector cl, cs;
  using SteadyClock = std::chrono::steady_clock;
  const auto t_long = SteadyClock::now();
  ASSERT_EQ(s.submit(make_request(*e, "long", long_prompt, kLongOut, cl)), SubmitStatus::Accepted);
  // The long prompt is admitted (it counts as running before its pass),
  // then the short one arrives while its pass runs.
  const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
  while (m.running.load() < 1 && SteadyClock::now() < deadline) std::this_thread::yield();
  const auto t_short = SteadyClock::now();
  ASSERT_EQ(s.submit(make_request(*e, "short", short_prompt, kShortOut, cs)),
            SubmitStatus::Accepted);
  const Finish fs = cs.wait(), fl = cl.wait();
  EXPECT_EQ(fs.reason, FinishReason::Length);
  EXPECT_EQ(fl.reason, FinishReason::Length);
  EXPECT_GE(m.step_yields.load(), 1u);
  EXPECT_EQ(m.yield_prompts.load(), 1u);
  using Ms = std::chrono::duration<double, std::milli>;
  const double short_first = Ms(t_short - t_long).count() + fs.timings.ttft_ms;
  EXPECT_LT(short_first, fl.timings.ttft_ms)
      << "the short prompt waited for the long pass (short TTFT " << fs.timings.ttft_ms
      << " ms, long " << fl.timings.ttft_ms << " ms)";
  EXPECT_EQ(cs.text(), short_alone);
  EXPECT_EQ(cl.text(), long_alone);
}

// With room for one short request beside the long one (max_batch 2), a
// second short request that arrives in the same long pass, after the first
// finished in a pause, gets the first one's batch slot in the next pause:
// what a pause ran and finished is retired there, not at the pass's end.
TEST(StepYield, ASecondShortPromptInOneLongPassTakesTheFirstsSlot) {
  const auto e = load_engine();
  const auto long_prompt = tokens_of(1000, 11);
  Metrics m;
  SchedulerOptions o;
  o.max_batch = 2;
  o.step_tokens = 1024;
  o.yield_ms = 1e-6;
  Scheduler s(*e, o, m);
  s.start();
  Collector cl, c1, c2;
  using SteadyClock = std::chrono::steady_clock;
  const auto t_long = SteadyClock::now();
  ASSERT_EQ(s.submit(make_request(*e, "long", long_prompt, 2, cl)), SubmitStatus::Accepted);
  const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
  while (m.running.load() < 1 && SteadyClock::now() < deadline) std::this_thread::yield();
  // One token each: the first finishes in its pause, and the second is sent
  // as soon as it has.
  ASSERT_EQ(s.submit(make_request(*e, "short1", tokens_of(12, 12), 1, c1)), SubmitStatus::Accepted);
  const Finish f1 = c1.wait();
  const auto t2 = SteadyClock::now();
  ASSERT_EQ(s.submit(make_request(*e, "short2", tokens_of(12, 13), 1, c2)), SubmitStatus::Accepted);
  const Finish f2 = c2.wait(), fl = cl.wait();
  EXPECT_EQ(f1.reason, FinishReason::Length);
  EXPECT_EQ(f2.reason, FinishReason::Length);
  EXPECT_EQ(fl.reason, FinishReason::Length);
  EXPECT_EQ(m.yield_prompts.load(), 2u);
  using Ms = std::chrono::duration<double, std::milli>;
  EXPECT_LT(Ms(t2 - t_long).count() + f2.timings.ttft_ms, fl.timings.ttft_ms)
      << "the second short prompt waited for the long pass";
}

// A long prompt that arrives while streams decode runs in passes of its own
// (Scheduler::plan_long_pass), and the streams decode in those passes'
// pauses, not in steps that carry a sliver of the prompt: the yield rounds
// run their decodes, and every answer is the one it gets alone.
TEST(StepYield, ALongPromptBesideStreamsRunsAloneWithTheStreamsInItsPauses) {
  const auto e = load_engine();
  const auto long_prompt = tokens_of(900, 21);
  constexpr int kStreams = 2, kStreamOut = 400, kLongOut = 3;
  std::vector<std::string> alone(kStreams);
  std::string long_alone;
  {
    Metrics m;
    SchedulerOptions o;
    o.max_batch = 4;
    o.step_tokens = 64;
    o.yield_ms = 0;  // off: the reference
    Scheduler s(*e, o, m);
    s.start();
    for (int i = 0; i < kStreams; ++i) {
      Collector c;
      ASSERT_EQ(
          s.submit(make_request(*e, "s" + std::to_string(i), tokens_of(10, 30 + i), kStreamOut, c)),
          SubmitStatus::Accepted);
      c.wait();
      alone[size_t(i)] = c.text();
    }
    Collector cl;
    ASSERT_EQ(s.submit(make_request(*e, "long", long_prompt, kLongOut, cl)),
              SubmitStatus::Accepted);
    cl.wait();
    long_alone = cl.text();
  }
  Metrics m;
  SchedulerOptions o;
  o.max_batch = 4;
  o.step_tokens = 64;  // the 900-token prompt is long
  o.yield_ms = 1e-6;
  o.itl_slack = 2;
  o.long_prompt_passes = true;
  Scheduler s(*e, o, m);
  s.start();
  Collector cs[kStreams], cl;
  for (int i = 0; i < kStreams; ++i)
    ASSERT_EQ(s.submit(make_request(*e, "s" + std::to_string(i), tokens_of(10, 30 + i), kStreamOut,
                                    cs[i])),
              SubmitStatus::Accepted);
  // The streams decode (decode-only steps teach the cost model their cost)
  // before the long prompt arrives.
  using SteadyClock = std::chrono::steady_clock;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
  while (m.generated_tokens.load() < 8 * kStreams && SteadyClock::now() < deadline)
    std::this_thread::yield();
  // A stream's prompt may itself have come in through a pause (the second
  // submit landing during the first stream's first step): count from here.
  const uint64_t yield_prompts_before = m.yield_prompts.load();
  ASSERT_EQ(s.submit(make_request(*e, "long", long_prompt, kLongOut, cl)), SubmitStatus::Accepted);
  EXPECT_EQ(cl.wait().reason, FinishReason::Length);
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(cs[i].wait().reason, FinishReason::Length);
    EXPECT_EQ(cs[i].text(), alone[size_t(i)]) << "stream " << i;
  }
  EXPECT_EQ(cl.text(), long_alone);
  // Without a long prompt's own passes, a pass beside decodes pauses only for
  // an arrival (none came after the long prompt, which is too long to go in
  // through a pause).
  EXPECT_GE(m.step_yields.load(), 2u);
  EXPECT_EQ(m.yield_prompts.load(), yield_prompts_before);
}

}  // namespace
}  // namespace tern::sched
