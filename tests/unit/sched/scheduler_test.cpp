// The scheduler against the real engine on a generated tiny model
// (tiny_engine.h): these tests always run, with or without the downloaded
// model file.
#include "tern/sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "collector.h"
#include "tern/core/error.h"
#include "tern/engine/engine.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

using testutil::Collector;

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

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o = testutil::tiny_engine_options(kCtx, 16);
    engine_ = Engine::load(o).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }

  static SamplingParams greedy(int max_tokens) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    // A random model samples EOS wherever it likes; the tests that compare
    // texts want every run at its full length (EosEndsWithStop covers EOS).
    p.ignore_eos = true;
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

  // Greedy outputs are the same whether a request runs alone or among 15
  // others, with prefill chunks interleaved with decodes (small step budget).
  void expect_batching_keeps_greedy_text() {
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

  // Long enough that a request running to the end of the context is still
  // running when the test cancels it.
  static constexpr int kCtx = 1024;
  static inline Engine* engine_ = nullptr;
  Metrics metrics_;
};

TEST_F(SchedulerTest, BatchingDoesNotChangeGreedyOutput) {
  expect_batching_keeps_greedy_text();
}

// The same on the downloaded SmolLM2 model: real BPE tokens (multi-byte
// UTF-8 pieces) and real weights. The one test here that skips without its
// model file; everything above runs on the generated one.
class SchedulerRealModelTest : public SchedulerTest {
 protected:
  static void SetUpTestSuite() {
    if (!test::file_exists(test::default_model_path())) return;
    EngineOptions o;
    o.model_path = test::default_model_path();
    o.n_ctx = 96;
    o.max_seqs = 16;
    engine_ = Engine::load(o).release();
  }
  void SetUp() override {
    if (!engine_) GTEST_SKIP() << "default model not found: " << test::default_model_path();
  }
};

TEST_F(SchedulerRealModelTest, BatchingDoesNotChangeGreedyOutput) {
  expect_batching_keeps_greedy_text();
}

// The scheduler's text equals a greedy loop written directly on
// Engine::step (an independent reference: no scheduler, no sampler, no
// incremental detokenizer), with the prompt prefilled in several chunks.
TEST_F(SchedulerTest, MatchesDirectGreedyLoop) {
  const std::string prompt = kPrompts[1];
  const auto ids = engine_->tokenizer().encode(prompt, true, false);
  const std::vector<int32_t> ref = testutil::greedy_tokens(*engine_, ids, kGen);
  Scheduler s(*engine_, SchedulerOptions{4, 8, 8, 0}, metrics_);  // 8-token prefill chunks
  s.start();
  Collector c;
  SamplingParams p = greedy(kGen);
  p.ignore_eos = true;  // the reference does not stop at EOS either
  ASSERT_EQ(s.submit(request("one", prompt, p, c)), SubmitStatus::Accepted);
  const Finish f = c.wait();
  ASSERT_GT(ids.size(), 8u) << "the prompt should need several prefill chunks";
  EXPECT_EQ(c.text(), engine_->tokenizer().decode(ref));
  EXPECT_EQ(f.usage.completion_tokens, kGen);
  EXPECT_EQ(c.tokens(), kGen);
}

TEST_F(SchedulerTest, MaxTokensStopsWithLength) {
  Scheduler s(*engine_, SchedulerOptions{4, 8, 64, 0}, metrics_);
  s.start();
  Collector c;
  SamplingParams p = greedy(5);
  p.ignore_eos = true;
  const uint64_t gen_before = metrics_.generated_tokens;
  const auto t0 = std::chrono::steady_clock::now();
  s.submit(request("len", kPrompts[1], p, c));
  const Finish f = c.wait();
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(f.reason, FinishReason::Length);
  EXPECT_EQ(f.usage.completion_tokens, 5);
  EXPECT_EQ(c.tokens(), 5);
  EXPECT_EQ(f.timings.predicted_n, 5);
  EXPECT_EQ(f.usage.prompt_tokens,
            int(engine_->tokenizer().encode(kPrompts[1], true, false).size()));
  EXPECT_EQ(f.timings.prompt_n, f.usage.prompt_tokens);
  // The timings are measured, not left at zero, and fit inside the wall time
  // the test itself measured around the request.
  EXPECT_GT(f.timings.prompt_ms, 0.0);
  EXPECT_GT(f.timings.predicted_ms, 0.0);
  EXPECT_LE(f.timings.ttft_ms + f.timings.predicted_ms, wall_ms);
  EXPECT_NEAR(f.timings.ttft_ms, f.timings.queue_ms + f.timings.prompt_ms, 1e-6 * wall_ms + 1e-9);
  EXPECT_EQ(metrics_.generated_tokens - gen_before, 5u);
}

// A sampled end-of-generation token ends the request with Stop and is not
// part of the text. Where the random model samples EOS comes from the direct
// greedy loop: the first prompt whose continuation reaches it.
TEST_F(SchedulerTest, EosEndsWithStop) {
  const Tokenizer& tok = engine_->tokenizer();
  constexpr int kLook = 64;
  for (const char* prompt : kPrompts) {
    const auto ref = testutil::greedy_tokens(*engine_, tok.encode(prompt, true, false), kLook);
    const auto eos = std::find_if(ref.begin(), ref.end(), [&](int32_t t) { return tok.is_eog(t); });
    if (eos == ref.end()) continue;
    const std::vector<int32_t> before(ref.begin(), eos);
    Scheduler s(*engine_, SchedulerOptions{4, 8, 64, 0}, metrics_);
    s.start();
    Collector c;
    SamplingParams p = greedy(kLook);
    p.ignore_eos = false;
    ASSERT_EQ(s.submit(request("eos", prompt, p, c)), SubmitStatus::Accepted);
    const Finish f = c.wait();
    EXPECT_EQ(f.reason, FinishReason::Stop) << prompt;
    EXPECT_EQ(f.usage.completion_tokens, int(before.size()) + 1) << prompt;
    EXPECT_EQ(c.text(), tok.decode(before)) << prompt;
    return;
  }
  FAIL() << "no prompt reaches EOS within " << kLook << " greedy tokens: change the model seed";
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
  Request run = request("run", kPrompts[4], p, running);
  // Run to the end, it would generate this many tokens (ContextFullEndsWithLength).
  const int to_the_end = engine_->n_ctx() - int(run.prompt.size()) + 1;
  s.submit(std::move(run));
  s.submit(request("wait", kPrompts[5], p, waiting));
  s.cancel(waiting.stream());
  const Finish fw = waiting.wait();
  EXPECT_EQ(fw.reason, FinishReason::Cancelled);
  EXPECT_EQ(fw.usage.completion_tokens, 0);
  EXPECT_EQ(fw.timings.prompt_n, 0) << "a cancelled waiting request never runs";
  s.cancel(running.stream());
  const Finish fr = running.wait();
  EXPECT_EQ(fr.reason, FinishReason::Cancelled);
  EXPECT_LT(fr.usage.completion_tokens, to_the_end) << "the cancel did not stop the generation";
  EXPECT_EQ(running.tokens(), fr.usage.completion_tokens);
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

// A short prompt that arrives behind a long one (another client, same rank)
// is prefilled first: its first token comes before the long prompt's, not
// after its whole prefill. The long one still gets the text it has alone.
TEST_F(SchedulerTest, ShortPromptIsPrefilledBeforeALongOne) {
  std::string long_text;
  while (long_text.size() < 600) long_text += kPrompts[long_text.size() % kN];
  std::string alone;
  {
    Scheduler s(*engine_, SchedulerOptions{1, 8, 16, 0}, metrics_);
    s.start();
    Collector c;
    s.submit(request("alone", long_text, greedy(4), c));
    ASSERT_NE(c.wait().reason, FinishReason::Error);
    alone = c.text();
  }
  // The order in which the streams first hear from the engine (a stream's
  // first notification is its first token).
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> order;
  auto stream_for = [&](std::string who) {
    return std::make_shared<Stream>([&, who] {
      std::lock_guard lock(mu);
      if (std::find(order.begin(), order.end(), who) == order.end()) order.push_back(who);
      cv.notify_all();
    });
  };
  Collector unused;
  Request lr = request("long", long_text, greedy(4), unused);
  lr.client = "a";
  lr.stream = stream_for("long");
  Request sr = request("short", "Hi there.", greedy(4), unused);
  sr.client = "b";
  sr.stream = stream_for("short");
  auto long_stream = lr.stream;
  Scheduler s(*engine_, SchedulerOptions{4, 8, 16, 0}, metrics_);
  s.submit(std::move(lr));  // first: the older admission
  s.submit(std::move(sr));
  s.start();
  std::string text;
  for (bool done = false; !done;) {
    auto c = long_stream->drain();
    text += c.text;
    if (c.finish) {
      ASSERT_NE(c.finish->reason, FinishReason::Error);
      done = true;
    } else if (c.empty()) {
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5));
    }
  }
  s.stop();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], "short") << "the short prompt waited for the long prefill";
  EXPECT_EQ(text, alone);
}

}  // namespace
}  // namespace tern::sched
