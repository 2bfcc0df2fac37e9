// A stream whose reader falls behind pauses its sequence (KV kept, nothing
// lost) and the drain that catches up resumes it; other sequences run on.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "collector.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

using namespace std::chrono_literals;

class BackpressureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o = testutil::tiny_engine_options(1024, 4);
    o.kv_flash_mb = 0;
    engine_ = Engine::load(o).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  static Request request(const std::string& id, std::shared_ptr<Stream> stream, int n) {
    Request r;
    r.id = id;
    r.prompt = engine_->tokenizer().encode("Backpressure test prompt.", true, false);
    r.params.temperature = 0;
    r.params.max_tokens = n;
    r.params.ignore_eos = true;
    r.stream = std::move(stream);
    return r;
  }
  static inline Engine* engine_ = nullptr;
  Metrics metrics_;
};

TEST_F(BackpressureTest, UnreadStreamPausesItsSequenceAndResumesOnDrain) {
  Scheduler sched(*engine_, SchedulerOptions{}, metrics_);
  sched.start();
  // A reader that reads nothing: the stream backlogs at 32 bytes (one byte a token).
  auto slow = std::make_shared<Stream>([] {}, /*backlog_bytes=*/32);
  ASSERT_EQ(sched.submit(request("slow", slow, 200)), SubmitStatus::Accepted);
  // Another client's generation is not held up by it.
  testutil::Collector other;
  ASSERT_EQ(sched.submit(request("other", other.stream(), 120)), SubmitStatus::Accepted);
  const Finish of = other.wait();
  EXPECT_EQ(of.reason, FinishReason::Length);
  EXPECT_EQ(of.usage.completion_tokens, 120);

  // The slow stream stopped at its bound: backlogged, not finished, not growing.
  ASSERT_TRUE(slow->backlogged());
  EXPECT_FALSE(slow->finished());
  const uint64_t generated = metrics_.generated_tokens.load();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(metrics_.generated_tokens.load(), generated) << "a paused sequence kept decoding";

  // It paused at the bound while the other ran on: one step past it at most.
  StreamChunk first = slow->drain();
  EXPECT_GE(first.text.size(), 32u);
  EXPECT_LE(first.text.size(), 34u) << "the sequence kept decoding past its stream's bound";

  // Draining resumes it; every token arrives, in order, as in an unpaced run.
  std::string text = first.text;
  int tokens = first.n_tokens;
  std::optional<Finish> fin = first.finish;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!fin && std::chrono::steady_clock::now() < deadline) {
    StreamChunk c = slow->drain();
    text += c.text;
    tokens += c.n_tokens;
    fin = c.finish;
    if (!fin) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(fin.has_value());
  EXPECT_EQ(fin->reason, FinishReason::Length);
  EXPECT_EQ(fin->usage.completion_tokens, 200);
  EXPECT_EQ(tokens, 200);

  testutil::Collector unpaced;
  ASSERT_EQ(sched.submit(request("unpaced", unpaced.stream(), 200)), SubmitStatus::Accepted);
  unpaced.wait();
  EXPECT_EQ(text, unpaced.text());
}

}  // namespace
}  // namespace tern::sched
