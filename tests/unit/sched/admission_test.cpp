// The admission policy on hand-built snapshots (no engine, no threads):
// fairness between clients, FIFO within a client, preempted before new, and
// which sequence yields its slot to a candidate that does not fit.
#include "../../../src/sched/admission.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tern::sched {
namespace {

using Waiting = AdmissionSnapshot::Waiting;
using Running = AdmissionSnapshot::Running;

Waiting fresh(std::string_view client, uint64_t order) {
  return {.client = client, .order = order, .tokens = 10};
}
Waiting preempted(std::string_view client, uint64_t order) {
  return {.client = client, .order = order, .tokens = 10, .preempted = true};
}
Running running(std::string_view client, uint64_t order) {
  return {.client = client, .order = order, .can_yield = true};
}

// Admits candidates one after another (as the scheduler does when all fit):
// the clients in the order they get their slots.
std::vector<std::string> admission_order(AdmissionSnapshot s) {
  std::vector<std::string> out;
  while (const auto c = next_candidate(s)) {
    const Waiting w = s.waiting[*c];
    out.emplace_back(w.client);
    out.back() += ":" + std::to_string(w.order);
    s.running.push_back({.client = w.client, .order = 100 + out.size()});
    s.waiting.erase(s.waiting.begin() + std::ptrdiff_t(*c));
  }
  return out;
}

TEST(Admission, TheClientWithTheFewestRunningGoesFirst) {
  AdmissionSnapshot s;
  s.running = {running("a", 0), running("a", 1)};
  s.waiting = {fresh("a", 0), fresh("a", 1), fresh("b", 2), fresh("b", 3), fresh("c", 4)};
  // b and c have nothing running: they go before a's queue, then turns alternate.
  EXPECT_EQ(admission_order(s), (std::vector<std::string>{"b:2", "c:4", "b:3", "a:0", "a:1"}));
}

TEST(Admission, OneClientsRequestsKeepTheirOrder) {
  AdmissionSnapshot s;
  s.waiting = {fresh("a", 5), fresh("a", 2), fresh("a", 9), fresh("a", 3)};
  EXPECT_EQ(admission_order(s), (std::vector<std::string>{"a:2", "a:3", "a:5", "a:9"}));
}

TEST(Admission, PreemptedGoBeforeNewAtEqualLoad) {
  AdmissionSnapshot s;
  s.running = {running("b", 0), running("b", 1)};
  // A new request older (smaller order) than the preempted sequence still
  // goes after it; a preempted one of a busier client waits its turn.
  s.waiting = {fresh("a", 0), preempted("a", 7), preempted("b", 3)};
  EXPECT_EQ(admission_order(s), (std::vector<std::string>{"a:7", "a:0", "b:3"}));
}

TEST(Admission, HeldEntriesAreSkipped) {
  AdmissionSnapshot s;
  s.waiting = {fresh("a", 0), fresh("b", 1)};
  s.waiting[0].held = true;
  EXPECT_EQ(next_candidate(s), 1u);
  s.waiting[1].held = true;
  EXPECT_FALSE(next_candidate(s));
}

TEST(Admission, TheNewestOfAClientRunningTwoMoreYields) {
  AdmissionSnapshot s;
  s.running = {running("a", 1), running("a", 4), running("a", 2), running("b", 3)};
  s.waiting = {fresh("b", 0)};
  // a runs 3, b 1: a's newest (order 4) yields.
  EXPECT_EQ(yield_victim(s, 0), 1u);
  // Only one more than the candidate's client: nobody yields.
  s.running.pop_back();  // b runs none, a three
  s.running.push_back(running("b", 5));
  s.running.push_back(running("b", 6));  // b runs two, a three
  EXPECT_FALSE(yield_victim(s, 0));
}

TEST(Admission, TheBusiestClientYieldsFirst) {
  AdmissionSnapshot s;
  s.running = {running("a", 9), running("a", 8), running("b", 1), running("b", 2), running("b", 3)};
  s.waiting = {fresh("c", 0)};
  // Both run at least two more than c; b runs the most, its newest yields
  // even though a's are newer.
  EXPECT_EQ(yield_victim(s, 0), 4u);
}

TEST(Admission, OnlySequencesWithKvYield) {
  AdmissionSnapshot s;
  s.running = {running("a", 1), running("a", 2), running("a", 3)};
  s.running[2].can_yield = false;  // admitted this round: nothing to give back yet
  s.waiting = {fresh("b", 0)};
  EXPECT_EQ(yield_victim(s, 0), 1u);
  // The candidate's own client never yields to it.
  s.waiting = {fresh("a", 0)};
  EXPECT_FALSE(yield_victim(s, 0));
}

TEST(Admission, RoomCountsSlotsBudgetAndBlocks) {
  AdmissionRoom r;
  r.max_batch = 2;
  r.block_tokens = 32;
  r.seq_slots = 4;
  r.kv_budget = 100;
  r.blocks = 3;
  EXPECT_EQ(r.blocks_for(31), 1);  // with its first generated token
  EXPECT_EQ(r.blocks_for(32), 2);
  // Nothing taken: anything fits (it gets the whole pool).
  EXPECT_TRUE(r.fits(1000));
  r.take(40);
  EXPECT_EQ(r.blocks, 1);
  EXPECT_EQ(r.planned, 2);
  EXPECT_TRUE(r.fits(31));
  EXPECT_FALSE(r.fits(32));  // two blocks, one left
  EXPECT_FALSE(r.fits(61));  // past the token budget
  r.blocks = 10;
  EXPECT_TRUE(r.fits(60));
  r.take(10);
  EXPECT_FALSE(r.fits(1));  // the batch is full
}

}  // namespace
}  // namespace tern::sched
