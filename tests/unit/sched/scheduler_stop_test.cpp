// stop() while requests are still queued and nothing runs: each queued
// request's stream gets Finish{Cancelled}, so no client waits forever.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "collector.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

using testutil::Collector;

TEST(SchedulerStop, RequestsStillQueuedAtStopFinishCancelled) {
  EngineOptions o = testutil::tiny_engine_options(256, 4);
  const std::unique_ptr<Engine> engine = Engine::load(o);
  Metrics m;
  Scheduler s(*engine, SchedulerOptions{2, 64, 64, 0}, m);
  s.start();
  // Hold the engine thread in a posted task, so the requests below stay
  // queued until stop() has raised its flags.
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  s.post([&entered, released] {
    entered.set_value();
    released.wait();
  });
  entered.get_future().wait();
  std::vector<std::unique_ptr<Collector>> cs;
  auto submit = [&] {
    cs.push_back(std::make_unique<Collector>());
    Request r;
    r.id = "queued" + std::to_string(cs.size());
    r.prompt = {1, 2, 3};
    r.params.max_tokens = 4;
    r.stream = cs.back()->stream();
    return s.submit(std::move(r));
  };
  ASSERT_EQ(submit(), SubmitStatus::Accepted);
  std::thread stopper([&] { s.stop(); });
  // Once stop() has run its first lines, submit answers ShuttingDown (the
  // requests accepted before that are queued too).
  while (submit() != SubmitStatus::ShuttingDown)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  cs.pop_back();  // refused: its stream never had a request
  release.set_value();
  stopper.join();
  for (auto& c : cs) EXPECT_EQ(c->wait(std::chrono::seconds(5)).reason, FinishReason::Cancelled);
}

}  // namespace
}  // namespace tern::sched
