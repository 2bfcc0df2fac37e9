// Fairness between clients through the scheduler (the policy on its own is
// admission_test.cpp): a client holding every batch slot yields its newest
// sequence to another client's request, which runs beside the others; the
// preempted sequence resumes when a slot frees, and every text equals its
// run alone.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collector.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

using testutil::Collector;

TEST(SchedulerFairness, AClientHoldingEverySlotYieldsOneToAnother) {
  EngineOptions o = testutil::tiny_engine_options(1024, 8);
  const std::unique_ptr<Engine> engine = Engine::load(o);
  auto request = [&](const std::string& client, const std::string& text, int max_tokens,
                     const Collector& c) {
    Request r;
    r.id = client + ": " + text;
    r.client = client;
    r.prompt = engine->tokenizer().encode(text, true, false);
    r.params.temperature = 0;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.stream = c.stream();
    return r;
  };
  // Long enough that a's three still run when b arrives.
  constexpr int kLong = 400, kShort = 5;
  const std::string a_texts[3] = {"The first of three", "A second one", "And a third"};
  const std::string b_text = "Another client asks";

  std::vector<std::string> alone;
  {
    Metrics m;
    Scheduler s(*engine, SchedulerOptions{1, 64, 512, 0}, m);
    s.start();
    for (int i = 0; i < 4; ++i) {
      Collector c;
      ASSERT_EQ(
          s.submit(i < 3 ? request("a", a_texts[i], kLong, c) : request("b", b_text, kShort, c)),
          SubmitStatus::Accepted);
      EXPECT_EQ(c.wait().reason, FinishReason::Length);
      alone.push_back(c.text());
    }
  }

  Metrics m;
  Scheduler s(*engine, SchedulerOptions{3, 64, 512, 0}, m);
  s.start();
  Collector a[3], b;
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(s.submit(request("a", a_texts[i], kLong, a[i])), SubmitStatus::Accepted);
  // a holds every slot once all three decode.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (m.generated_tokens.load() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(m.running.load(), 3);
  ASSERT_EQ(s.submit(request("b", b_text, kShort, b)), SubmitStatus::Accepted);
  const Finish fb = b.wait();
  EXPECT_EQ(fb.reason, FinishReason::Length);
  EXPECT_EQ(b.text(), alone[3]);
  // b did not wait for one of a's to end: a's newest yielded its slot.
  int a_finished = 0;
  for (const Collector& c : a) a_finished += c.stream()->finished() ? 1 : 0;
  EXPECT_EQ(a_finished, 0) << "b waited for a slot instead of getting one";
  EXPECT_EQ(m.preemptions.load(), 1u);
  for (int i = 0; i < 3; ++i) {
    const Finish f = a[i].wait();
    EXPECT_EQ(f.reason, FinishReason::Length);
    EXPECT_EQ(f.timings.preemptions, i == 2 ? 1 : 0) << "a" << i;
    EXPECT_EQ(a[i].text(), alone[size_t(i)]) << "a" << i;
  }
}

}  // namespace
}  // namespace tern::sched
