// The scheduler against the real engine and the default model (skipped when
// the model file is absent).
#include "tern/sched/scheduler.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "tern/core/error.h"
#include "tern/engine/engine.h"
#include "tern/engine/generate.h"
#include "tern/tokenizer/tokenizer.h"
#include "collector.h"
#include "testutil.h"

namespace tern::sched {
namespace {

using testutil::Collector;

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = test::default_model_path();
    if (!test::file_exists(path)) return;
    EngineOptions o;
    o.model_path = path;
    o.n_ctx = 96;
    o.max_seqs = 16;
    engine_ = Engine::load(o).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (!engine_) GTEST_SKIP() << "default model not found: " << test::default_model_path();
  }

  static SamplingParams greedy(int max_tokens) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    return p;
  }

  static Request request(const std::string& id, const std::string& text, SamplingParams p,
                         const Collector& c) {
    Request r;
    r.id = id;
    r.prompt = engine_->tokenizer().encode(text, true, false);
    r.params = std::move(p);
    r.stream = c.stream();
    return r;
  }

  static inline Engine* engine_ = nullptr;
  Metrics metrics_;
};

const char* const kPrompts[] = {
    "The capital of France is",
    "Once upon a time, there was a",
    "1, 2, 3, 4,",
    "The quick brown fox",
    "In the beginning",
    "My favourite food is",
    "def fibonacci(n):",
    "The weather today is",
    "Water boils at",
    "A haiku about the sea:",
    "The best way to learn is",
    "Dear diary, today I",
    "Roses are red,",
    "The meaning of life is",
    "Cats and dogs are",
    "Breaking news:",
};
constexpr int kN = 16;
constexpr int kGen = 12;

// Greedy outputs are the same whether a request runs alone or among 15
// others, with prefill chunks interleaved with decodes (small step budget).
TEST_F(SchedulerTest, BatchingDoesNotChangeGreedyOutput) {
  std::vector<std::string> alone(kN);
  {
    Scheduler s(*engine_, SchedulerOptions{1, 64, 8, 0}, metrics_);
    s.start();
    for (int i = 0; i < kN; ++i) {
      Collector c;
      ASSERT_EQ(s.submit(request("alone" + std::to_string(i), kPrompts[i], greedy(kGen), c)),
                SubmitStatus::Accepted);
      const Finish f = c.wait();
      ASSERT_NE(f.reason, FinishReason::Error) << f.error;
      alone[i] = c.text();
      EXPECT_FALSE(alone[i].empty()) << kPrompts[i];
    }
  }
  Scheduler s(*engine_, SchedulerOptions{kN, 64, 24, 0}, metrics_);
  std::vector<std::unique_ptr<Collector>> cs;
  for (int i = 0; i < kN; ++i) {
    cs.push_back(std::make_unique<Collector>());
    ASSERT_EQ(s.submit(request("batch" + std::to_string(i), kPrompts[i], greedy(kGen), *cs[i])),
              SubmitStatus::Accepted);
  }
  const uint64_t steps_before = metrics_.steps;
  s.start();
  for (int i = 0; i < kN; ++i) {
    const Finish f = cs[i]->wait();
    EXPECT_NE(f.reason, FinishReason::Error) << f.error;
    EXPECT_EQ(cs[i]->text(), alone[i]) << "prompt " << i << ": " << kPrompts[i];
  }
  // Batched: far fewer forward passes than 16 separate runs would need.
  EXPECT_LT(metrics_.steps - steps_before, uint64_t(kN * kGen / 2));
}

// The scheduler's text equals the engine's single-sequence generate().
TEST_F(SchedulerTest, MatchesSingleSequenceGenerate) {
  const std::string prompt = kPrompts[0];
  GenerateOptions go;
  go.sampling = greedy(kGen);
  const auto ids = engine_->tokenizer().encode(prompt, true, false);
  const auto ref = generate(*engine_, ids, go);
  Scheduler s(*engine_, SchedulerOptions{4, 8, 16, 0}, metrics_);
  s.start();
  Collector c;
  s.submit(request("one", prompt, greedy(kGen), c));
  const Finish f = c.wait();
  EXPECT_EQ(c.text(), ref.text);
  EXPECT_EQ(f.usage.completion_tokens, int(ref.tokens.size()));
}

TEST_F(SchedulerTest, MaxTokensStopsWithLength) {
  Scheduler s(*engine_, SchedulerOptions{4, 8, 64, 0}, metrics_);
  s.start();
  Collector c;
  SamplingParams p = greedy(5);
  p.ignore_eos = true;
  const uint64_t gen_before = metrics_.generated_tokens;
  s.submit(request("len", kPrompts[1], p, c));
  const Finish f = c.wait();
  EXPECT_EQ(f.reason, FinishReason::Length);
  EXPECT_EQ(f.usage.completion_tokens, 5);
  EXPECT_EQ(c.tokens(), 5);
  EXPECT_EQ(f.timings.predicted_n, 5);
  EXPECT_GT(f.usage.prompt_tokens, 0);
  EXPECT_EQ(f.timings.prompt_n, f.usage.prompt_tokens);
  EXPECT_GE(f.timings.ttft_ms, f.timings.prompt_ms);
  EXPECT_EQ(metrics_.generated_tokens - gen_before, 5u);
}

TEST_F(SchedulerTest, StopStringEndsTextBeforeIt) {
  Scheduler s(*engine_, SchedulerOptions{4, 8, 64, 0}, metrics_);
  s.start();
  Collector ref;
  s.submit(request("ref", kPrompts[2], greedy(kGen), ref));
  ref.wait();
  const std::string full = ref.text();
  ASSERT_GE(full.size(), 6u) << full;
  // A stop string that starts in the middle of the output.
  const std::string stop = full.substr(full.size() / 2, 2);
  const std::string expected = full.substr(0, full.find(stop));
  SamplingParams p = greedy(kGen);
  p.stop = {stop};
  Collector c;
  s.submit(request("stop", kPrompts[2], p, c));
  const Finish f = c.wait();
  EXPECT_EQ(f.reason, FinishReason::Stop);
  EXPECT_EQ(c.text(), expected) << "full: " << full << " stop: " << stop;
}

TEST_F(SchedulerTest, ContextFullEndsWithLength) {
  Scheduler s(*engine_, SchedulerOptions{2, 8, 64, 0}, metrics_);
  s.start();
  Collector c;
  SamplingParams p = greedy(-1);
  p.ignore_eos = true;
  Request r = request("ctx", kPrompts[3], p, c);
  const int prompt = int(r.prompt.size());
  s.submit(std::move(r));
  const Finish f = c.wait();
  EXPECT_EQ(f.reason, FinishReason::Length);
  // Positions 0..n_ctx-1 hold the prompt and all but the last sampled token.
  EXPECT_EQ(f.usage.completion_tokens, engine_->n_ctx() - prompt + 1);
}

TEST_F(SchedulerTest, RejectsBadPrompts) {
  Scheduler s(*engine_, SchedulerOptions{2, 8, 64, 0}, metrics_);
  Collector c;
  Request r = request("empty", "x", greedy(1), c);
  r.prompt.clear();
  EXPECT_THROW(s.submit(std::move(r)), InvalidArgument);
  r = request("long", "x", greedy(1), c);
  r.prompt.assign(size_t(engine_->n_ctx()) + 1, r.prompt[0]);
  EXPECT_THROW(s.submit(std::move(r)), InvalidArgument);
  r = request("vocab", "x", greedy(1), c);
  r.prompt.push_back(engine_->n_vocab());
  EXPECT_THROW(s.submit(std::move(r)), InvalidArgument);
  EXPECT_THROW(Scheduler(*engine_, SchedulerOptions{8, 8, 4, 0}, metrics_), InvalidArgument);
}

// A reader that never drains does not hold the engine back: the generation
// runs to the end and its text waits, coalesced, for one drain.
TEST_F(SchedulerTest, SlowReaderNeverStallsSteps) {
  Scheduler s(*engine_, SchedulerOptions{4, 8, 64, 0}, metrics_);
  s.start();
  auto stream = std::make_shared<Stream>([] {});  // nobody listens
  SamplingParams p = greedy(20);
  p.ignore_eos = true;
  Request r;
  r.id = "slow";
  r.prompt = engine_->tokenizer().encode(kPrompts[6], true, false);
  r.params = p;
  r.stream = stream;
  s.submit(std::move(r));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!stream->finished() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(stream->finished()) << "the generation waited for its reader";
  const StreamChunk c = stream->drain();
  EXPECT_EQ(c.n_tokens, 20);
  EXPECT_FALSE(c.text.empty());
  ASSERT_TRUE(c.finish);
  EXPECT_EQ(c.finish->reason, FinishReason::Length);
  EXPECT_TRUE(stream->drain().empty());
}

// A full waiting queue refuses; stop() cancels what never ran.
TEST_F(SchedulerTest, QueueFullAndShutdown) {
  Scheduler s(*engine_, SchedulerOptions{1, 2, 64, 0}, metrics_);  // not started: all wait
  Collector a, b, c;
  EXPECT_EQ(s.submit(request("a", kPrompts[0], greedy(4), a)), SubmitStatus::Accepted);
  EXPECT_EQ(s.submit(request("b", kPrompts[1], greedy(4), b)), SubmitStatus::Accepted);
  EXPECT_EQ(s.submit(request("c", kPrompts[2], greedy(4), c)), SubmitStatus::QueueFull);
  EXPECT_EQ(metrics_.queue_depth, 2);
  EXPECT_FALSE(s.idle());
  s.stop_accepting();
  EXPECT_EQ(s.submit(request("c", kPrompts[2], greedy(4), c)), SubmitStatus::ShuttingDown);
  s.stop();
  EXPECT_EQ(a.wait().reason, FinishReason::Cancelled);
  EXPECT_EQ(b.wait().reason, FinishReason::Cancelled);
  EXPECT_TRUE(a.text().empty());
}

// Cancelling a waiting request drops it without running it; cancelling a
// running one frees its sequence at the next boundary.
TEST_F(SchedulerTest, CancelWaitingAndRunning) {
  Scheduler s(*engine_, SchedulerOptions{1, 8, 64, 0}, metrics_);
  s.start();
  Collector running, waiting;
  SamplingParams p = greedy(-1);
  p.ignore_eos = true;  // would run to the end of the context
  s.submit(request("run", kPrompts[4], p, running));
  s.submit(request("wait", kPrompts[5], p, waiting));
  s.cancel(waiting.stream());
  const Finish fw = waiting.wait();
  EXPECT_EQ(fw.reason, FinishReason::Cancelled);
  EXPECT_EQ(fw.usage.completion_tokens, 0);
  EXPECT_EQ(fw.timings.prompt_n, 0) << "a cancelled waiting request never runs";
  s.cancel(running.stream());
  const Finish fr = running.wait();
  EXPECT_EQ(fr.reason, FinishReason::Cancelled);
  EXPECT_LT(fr.usage.completion_tokens, engine_->n_ctx());
  // Everything is released: the idle callback fires and all sequences are free.
  std::mutex mu;
  std::condition_variable cv;
  bool idle = s.idle();
  s.set_idle_callback([&] {
    std::lock_guard lock(mu);
    idle = true;
    cv.notify_one();
  });
  {
    std::unique_lock lock(mu);
    if (!idle) cv.wait_for(lock, std::chrono::seconds(30), [&] { return idle || s.idle(); });
  }
  EXPECT_TRUE(s.idle());
  s.stop();
  EXPECT_EQ(engine_->free_sequences(), 16);
  EXPECT_EQ(metrics_.running, 0);
}

}  // namespace
}  // namespace tern::sched
