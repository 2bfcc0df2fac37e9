// SyncClient: one request at a time through the real scheduler and engine
// (the CLI's path), with the default model (skipped when it is absent).
#include "tern/sched/sync_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tern/core/error.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"

namespace tern::sched {
namespace {

class SyncClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::file_exists(test::default_model_path())) GTEST_SKIP() << "default model not found";
    EngineOptions o;
    o.model_path = test::default_model_path();
    o.n_ctx = 512;
    o.max_seqs = 1;
    o.kv_dram_mb = 64;
    o.kv_flash_mb = 0;
    engine_ = Engine::load(o);
    scheduler_ = std::make_unique<Scheduler>(*engine_, SchedulerOptions{1, 1, 512, 0}, metrics_);
    scheduler_->start();
  }

  Request request(const std::string& text, int max_tokens) {
    Request r;
    r.id = "t";
    r.prompt = engine_->tokenizer().encode(text, true, false);
    r.params.temperature = 0;
    r.params.max_tokens = max_tokens;
    return r;
  }

  std::unique_ptr<Engine> engine_;
  Metrics metrics_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SyncClientTest, StreamsTextAndReturnsTheFinish) {
  SyncClient client(*scheduler_);
  std::string a, b;
  const Finish fa = client.run(request("The capital of France is", 8), [&](std::string_view s) {
    a.append(s);
    return true;
  });
  EXPECT_EQ(fa.reason, FinishReason::Length) << fa.error;
  EXPECT_EQ(fa.usage.completion_tokens, 8);
  EXPECT_FALSE(a.empty());
  // The next request runs on the same scheduler and gives the same greedy text.
  const Finish fb = client.run(request("The capital of France is", 8), [&](std::string_view s) {
    b.append(s);
    return true;
  });
  EXPECT_EQ(fb.reason, FinishReason::Length);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(client.cancel());  // nothing in flight
}

TEST_F(SyncClientTest, OnTextFalseCancels) {
  SyncClient client(*scheduler_);
  int calls = 0;
  const Finish f = client.run(request("1, 2, 3, 4, 5,", 400), [&](std::string_view) {
    ++calls;
    return false;
  });
  EXPECT_EQ(f.reason, FinishReason::Cancelled);
  EXPECT_EQ(calls, 1);
  EXPECT_LT(f.usage.completion_tokens, 400);
}

TEST_F(SyncClientTest, CancelFromAnotherThread) {
  SyncClient client(*scheduler_);
  std::atomic<bool> started{false};
  std::thread canceller([&] {
    while (!started.load()) std::this_thread::yield();
    EXPECT_TRUE(client.cancel());
  });
  const Finish f = client.run(request("1, 2, 3, 4, 5,", 400), [&](std::string_view) {
    started.store(true);
    return true;
  });
  canceller.join();
  EXPECT_EQ(f.reason, FinishReason::Cancelled);
  EXPECT_LT(f.usage.completion_tokens, 400);
}

TEST_F(SyncClientTest, RefusedSubmitIsAnErrorFinish) {
  SyncClient client(*scheduler_);
  scheduler_->stop_accepting();
  const Finish f = client.run(request("Hello", 4), {});
  EXPECT_EQ(f.reason, FinishReason::Error);
  EXPECT_NE(f.error.find("shutting down"), std::string::npos) << f.error;
  const Finish empty = client.run(Request{}, {});  // an empty prompt is refused, not thrown
  EXPECT_EQ(empty.reason, FinishReason::Error);
  EXPECT_NE(empty.error.find("empty"), std::string::npos) << empty.error;
}

TEST_F(SyncClientTest, PromptLongerThanTheContextIsAnErrorFinish) {
  SyncClient client(*scheduler_);
  Request r = request("Hello", 4);
  r.prompt.assign(size_t(scheduler_->n_ctx()) + 5, r.prompt.front());
  const Finish f = client.run(std::move(r), {});
  EXPECT_EQ(f.reason, FinishReason::Error);
  EXPECT_NE(f.error.find("maximum context length"), std::string::npos) << f.error;
}

}  // namespace
}  // namespace tern::sched
