// FetchGate: remote fetches in flight per client and in all; the rest wait
// first come first served, and a waiter that is cancelled leaves the queue.
#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <string>
#include <vector>

#include "../../../src/server/media_prefetch.h"

namespace tern::server {
namespace {

// A slot of a gate, once granted (or the failure of a cancelled wait).
struct Holder {
  std::optional<FetchGate::Slot> slot;
  bool failed = false;
};

awaitable<void> take(FetchGate& gate, std::string client, Holder& h) {
  try {
    h.slot.emplace(co_await gate.acquire(client));
  } catch (const std::exception&) {
    h.failed = true;
  }
}

TEST(FetchGate, LimitsPerClientAndInAll) {
  net::io_context io;
  FetchGate gate(/*total=*/3, /*per_client=*/2);
  std::vector<Holder> a(3), b(2);
  for (auto& h : a) net::co_spawn(io, take(gate, "a", h), net::detached);
  for (auto& h : b) net::co_spawn(io, take(gate, "b", h), net::detached);
  io.poll();
  // a: 2 (its limit), b: 1 (the total is 3); a[2] and b[1] wait.
  EXPECT_TRUE(a[0].slot && a[1].slot && !a[2].slot);
  EXPECT_TRUE(b[0].slot && !b[1].slot);
  EXPECT_EQ(gate.in_flight(), 3);

  b[0].slot.reset();  // one free in all: a[2] waited first but a is at its limit
  io.poll();
  EXPECT_FALSE(a[2].slot.has_value());
  EXPECT_TRUE(b[1].slot.has_value());

  a[0].slot.reset();  // a has room again
  io.poll();
  EXPECT_TRUE(a[2].slot.has_value());
  EXPECT_EQ(gate.in_flight(), 3);
}

TEST(FetchGate, ACancelledWaiterLeavesTheQueue) {
  net::io_context io;
  FetchGate gate(/*total=*/1, /*per_client=*/1);
  Holder first, cancelled, last;
  net::co_spawn(io, take(gate, "a", first), net::detached);
  net::cancellation_signal cancel;
  net::co_spawn(io, take(gate, "b", cancelled),
                net::bind_cancellation_slot(cancel.slot(), net::detached));
  net::co_spawn(io, take(gate, "c", last), net::detached);
  io.poll();
  ASSERT_TRUE(first.slot.has_value());
  cancel.emit(net::cancellation_type::terminal);
  io.poll();
  EXPECT_TRUE(cancelled.failed);
  first.slot.reset();  // the slot goes past the cancelled waiter to the next
  io.poll();
  EXPECT_TRUE(last.slot.has_value());
  EXPECT_FALSE(cancelled.slot.has_value());
  last.slot.reset();
  EXPECT_EQ(gate.in_flight(), 0);
}

}  // namespace
}  // namespace tern::server
