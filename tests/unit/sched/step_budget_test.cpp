// The step cost model that sizes prefill chunks beside decodes: fed step
// times made from known costs (no clock), it must recover them and pick the
// chunk sizes they imply.
#include "../../../src/sched/step_budget.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tern::sched {
namespace {

constexpr double kDecodeMs = 13.0;

// A machine whose chunk of n tokens at depth d costs a*n + b*n*(d+n/2)/1024
// + c*d/1024 ms beside the decodes.
struct Truth {
  double a = 0.7, b = 1.2, c = 3.0;
  double chunk(int n, int d) const { return a * n + b * n * (d + n / 2.0) / 1024 + c * d / 1024; }
};

void decode_only(StepBudget& sb, double ms = kDecodeMs) {
  sb.observe(8, ms);
}

void mixed(StepBudget& sb, const Truth& t, int n, int d) {
  sb.add_chunk(n, d);
  sb.observe(8, kDecodeMs + t.chunk(n, d));
}

TEST(StepBudget, NotReadyUntilItHasSeenBothKindsOfStep) {
  StepBudget sb;
  EXPECT_FALSE(sb.ready());
  decode_only(sb);
  EXPECT_FALSE(sb.ready());
  EXPECT_DOUBLE_EQ(sb.decode_ms(), kDecodeMs);
  mixed(sb, Truth{}, 10, 0);
  EXPECT_TRUE(sb.ready());
  EXPECT_FALSE(sb.fitted());
  // Until the fit is ready a token costs the average seen (about 0.7 ms),
  // whatever the depth.
  const double per_token = Truth{}.chunk(10, 0) / 10;
  EXPECT_NEAR(sb.chunk_ms(20, 3000), 20 * per_token, 0.01);
  EXPECT_EQ(sb.chunk_tokens(13.0, 0, 64), 18);
}

TEST(StepBudget, StepsWithoutDecodesTeachNothing) {
  StepBudget sb;
  sb.add_chunk(64, 0);
  sb.observe(0, 100.0);
  EXPECT_EQ(sb.decode_ms(), 0);
  EXPECT_FALSE(sb.ready());
  decode_only(sb);
  sb.add_chunk(64, 0);
  sb.observe(0, 100.0);  // its chunk must not leak into the next step
  decode_only(sb);
  EXPECT_FALSE(sb.ready());
}

// A budget fitted on a long prompt prefilled beside decodes, chunks of
// varying size (room: 13 ms).
StepBudget fitted_budget(const Truth& t) {
  StepBudget sb;
  decode_only(sb);
  int d = 0;
  for (int i = 0; i < 60; ++i) {
    const int n = 2 + (i * 7) % 30;
    mixed(sb, t, n, d);
    d += n;
  }
  return sb;
}

TEST(StepBudget, RecoversDepthDependentCostsAndSizesChunksByThem) {
  const Truth t;
  const StepBudget sb = fitted_budget(t);
  ASSERT_TRUE(sb.fitted());
  const auto th = sb.coefficients();
  EXPECT_NEAR(th[0], t.a, 0.05 * t.a);
  EXPECT_NEAR(th[1], t.b, 0.05 * t.b);
  EXPECT_NEAR(th[2], t.c, 0.05 * t.c);
  // The chunk that fits the room (slack 2: one decode step) at each depth is
  // the largest n with t.chunk(n, d) <= 13 ms.
  const double room = sb.room_ms(2.0);
  EXPECT_DOUBLE_EQ(room, kDecodeMs);
  for (int depth : {0, 512, 1024, 2048, 3072, 4096}) {
    int want = 0;
    while (want < 64 && t.chunk(want + 1, depth) <= room) ++want;
    const int got = sb.chunk_tokens(room, depth, 64);
    EXPECT_NEAR(got, want, 1) << "at depth " << depth;
    EXPECT_LE(got, sb.chunk_tokens(room, depth / 2, 64)) << "deeper chunks must not grow";
  }
  // Near depth 4096 the pass over the context alone (c*4) plus one token's
  // attention leaves room for only a couple of tokens.
  EXPECT_LE(sb.chunk_tokens(room, 4096, 64), 2);
  // A prompt's start is cheap: a short request's whole 36 tokens fit three rooms.
  EXPECT_LE(sb.chunk_ms(36, 0), 3 * room);
  // And the cap is respected.
  EXPECT_EQ(sb.chunk_tokens(1000.0, 0, 5), 5);
}

TEST(StepBudget, NothingFitsWhenOneTokenOverrunsTheRoom) {
  Truth t;
  t.c = 20;  // a pass over 4096 tokens: 80 ms
  StepBudget sb;
  decode_only(sb);
  int d = 0;
  for (int i = 0; i < 40; ++i) {
    const int n = 4 + i % 9;
    mixed(sb, t, n, d);
    d += 100;
  }
  EXPECT_EQ(sb.chunk_tokens(sb.room_ms(2.0), 4000, 64), 0);
  EXPECT_GT(sb.chunk_tokens(sb.room_ms(2.0), 0, 64), 0);
}

// Chunks that all look alike (the budget pinned at 2 tokens deep in a
// prompt) leave the split between the per-token and per-chunk terms open;
// the fit must stay finite and keep predicting what it sees.
TEST(StepBudget, StaysStableWhenEveryChunkIsTheSameSize) {
  const Truth t;
  StepBudget sb;
  decode_only(sb);
  for (int d = 2000; d < 4096; d += 2) mixed(sb, t, 2, d);
  for (double v : sb.coefficients()) EXPECT_TRUE(std::isfinite(v) && v >= 0);
  EXPECT_NEAR(sb.chunk_ms(2, 4000), t.chunk(2, 4000), 0.05 * t.chunk(2, 4000));
  EXPECT_LE(sb.chunk_tokens(sb.room_ms(2.0), 4000, 64), 4);
}

// Hundreds of 2-token chunks deep in a long prompt must not make the model
// forget what a short prompt at depth 0 costs (a short request arriving
// late in a long prefill still goes whole).
TEST(StepBudget, RemembersShallowCostsThroughALongPinnedPrefill) {
  const Truth t;
  StepBudget sb;
  decode_only(sb);
  for (int i = 0; i < 20; ++i) mixed(sb, t, 4 + (i * 5) % 40, (i % 4) * 50);
  for (int d = 2000; d < 4096; d += 2) mixed(sb, t, 2, d);
  EXPECT_NEAR(sb.chunk_ms(36, 0), t.chunk(36, 0), 0.1 * t.chunk(36, 0));
  EXPECT_NEAR(sb.chunk_ms(2, 4000), t.chunk(2, 4000), 0.05 * t.chunk(2, 4000));
  EXPECT_LE(sb.chunk_ms(36, 0), 3 * sb.room_ms(2.0));
}

TEST(StepBudget, OutliersFadeOutOfTheWindow) {
  const Truth t;
  StepBudget sb;
  decode_only(sb);
  for (int i = 0; i < 20; ++i) mixed(sb, t, 2 + i % 20, 10 * i);
  // A stall (another process took the cores) on a few shallow steps...
  for (int i = 0; i < 4; ++i) {
    sb.add_chunk(8, 100 * i);
    sb.observe(8, 500.0);
  }
  // ...then a window's worth of ordinary steps.
  for (int i = 0; i < StepBudget::kWindow; ++i) mixed(sb, t, 2 + i % 20, 50 * i);
  EXPECT_NEAR(sb.chunk_ms(10, 1000), t.chunk(10, 1000), 0.05 * t.chunk(10, 1000));
}

TEST(StepBudget, ProbesADecodeOnlyStepEveryFewMixedOnes) {
  const Truth t;
  StepBudget sb;
  decode_only(sb);
  for (int i = 0; i < StepBudget::kProbeEvery; ++i) {
    EXPECT_FALSE(sb.probe_due()) << i;
    mixed(sb, t, 4, 100 * i);
  }
  EXPECT_TRUE(sb.probe_due());
  // The probe measures the decodes afresh (their contexts grew): the room follows.
  decode_only(sb, 20.0);
  EXPECT_FALSE(sb.probe_due());
  EXPECT_NEAR(sb.decode_ms(), 13.0 + 0.3 * 7.0, 1e-9);
  EXPECT_NEAR(sb.room_ms(2.0), sb.decode_ms(), 1e-9);
  // A step the model does not describe (images) still counts toward the probe.
  for (int i = 0; i < StepBudget::kProbeEvery; ++i) {
    sb.add_chunk(4, 0);
    sb.observe(8, 1000.0, false);
  }
  EXPECT_TRUE(sb.probe_due());
  EXPECT_LT(sb.chunk_ms(4, 0), 100.0) << "an unmodelled step must not enter the fit";
}

// Two short prompts in one step (a stream's next request and a short
// request, arriving together during a long prefill): both go whole, since
// together they cost under three rooms, and the long prompt waits a step.
TEST(StepRoom, ShortPromptsTogetherGoWholeAndTheLongOneWaits) {
  const Truth t;
  const StepBudget sb = fitted_budget(t);
  StepRoom room(sb, sb.room_ms(2.0), 2);
  const int a = room.size(512, 13, 32, 0, true);
  EXPECT_EQ(a, 13);
  room.take(a, 32);
  const int b = room.size(512, 36, 0, 0, true);
  EXPECT_EQ(b, 36) << "the second short prompt was cut to what one room had left";
  room.take(b, 0);
  EXPECT_LT(room.left_ms(), 0);
  EXPECT_EQ(room.size(512, 900, 3000, 2, false), 0) << "a long chunk beside them";
}

// Whole means within three rooms: a short prompt costing more is chunked
// like any other, and a long prompt's last tokens are not a short prompt.
TEST(StepRoom, OnlyCheapUntouchedPromptsGoWhole) {
  const Truth t;
  const StepBudget sb = fitted_budget(t);
  const double r = sb.room_ms(2.0);
  {
    StepRoom room(sb, r, 2);
    const int n = room.size(512, 80, 0, 0, true);  // ~57 ms: over three rooms
    EXPECT_EQ(n, sb.chunk_tokens(r, 0, 80));
    EXPECT_LT(n, 80);
  }
  {
    StepRoom room(sb, r, 2);  // the tail of a 4,126-token prompt, first in the step
    EXPECT_EQ(room.size(512, 39, 4087, 2, false), 2);
  }
  {
    StepRoom room(sb, r, 2);  // a long chunk grows at most twofold a step
    EXPECT_EQ(room.size(512, 900, 0, 4, false), 10);
    // and the token budget caps everything
    EXPECT_EQ(room.size(5, 36, 0, 0, true), 5);
  }
}

}  // namespace
}  // namespace tern::sched
