#pragma once
// The request preparation with remote media (remote_media.h's flow): the
// parse runs on ctx.prep; when it needs remote URLs, they are fetched here on
// the session's executor (the reactor), bounded by the server's FetchGate,
// and the parse runs again with their bytes. A preparation thread never
// waits on the network.
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "net.h"
#include "tern/server/openai_request.h"

namespace tern::server {

struct ServerContext;

// Remote fetches in flight: at most `total` in all and `per_client` for one
// client (a peer address); the rest wait their turn, first come first
// served. (reactor)
class FetchGate {
 public:
  FetchGate(int total, int per_client) : total_(total), per_client_(per_client) {}

  // A slot for `client`, given back when the Slot is destroyed.
  class Slot {
   public:
    Slot(FetchGate* g, std::string client) : gate_(g), client_(std::move(client)) {}
    Slot(Slot&& o) noexcept : gate_(std::exchange(o.gate_, nullptr)), client_(o.client_) {}
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (gate_) gate_->release(client_);
    }

   private:
    FetchGate* gate_;
    std::string client_;
  };

  // Waits for a slot. Throws system_error (operation_aborted) if the waiting
  // coroutine is cancelled first.
  awaitable<Slot> acquire(std::string client);

  int in_flight() const { return in_flight_; }

 private:
  struct Waiter {
    Waiter(std::string c, const net::any_io_executor& ex)
        : client(std::move(c)), timer(ex, net::steady_timer::time_point::max()) {}
    std::string client;
    net::steady_timer timer;  // cancelled when a slot is handed over
    bool granted = false;
  };
  bool has_room(const std::string& client) const;
  void take(const std::string& client);
  void release(const std::string& client);

  int total_, per_client_;
  int in_flight_ = 0;
  std::unordered_map<std::string, int> by_client_;
  std::list<std::shared_ptr<Waiter>> waiters_;
};

// Runs `parse` on ctx.prep inside a FetchedMediaScope; fetches the remote
// media it asks for (NeedsRemoteMedia) for `client` and runs it once more.
awaitable<GenerationRequest> prepare_with_remote_media(ServerContext& ctx,
                                                       const std::string& client,
                                                       std::function<GenerationRequest()> parse);

// The peer's address, the unit FetchGate limits ("" when unknown).
std::string peer_address(const tcp::socket& s);

}  // namespace tern::server
