#pragma once
// Recent Responses API conversations, so a request can continue one with
// `previous_response_id`: each stored response keeps its whole history (the
// input it was given, its predecessors' turns, its own output). Bounded in
// count (the oldest goes first) and in age (a TTL). Thread-safe: requests
// are parsed on the prep thread and stored from the reactor.
#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tern/server/openai_request.h"

namespace tern::server {

class ResponseStore {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ResponseStore(size_t max_entries = 1024, Clock::duration ttl = std::chrono::hours(1))
      : max_entries_(max_entries), ttl_(ttl) {}

  // `response` is the finished response object, for GET /v1/responses/{id}.
  void put(const std::string& id, std::vector<Message> history, nlohmann::json response = {});
  // The history of `id`, or nothing when it is unknown or expired.
  std::optional<std::vector<Message>> get(const std::string& id);
  // The stored response object of `id`, or nothing.
  std::optional<nlohmann::json> response(const std::string& id);
  // Forgets `id`; false if it was not there.
  bool erase(const std::string& id);
  size_t size() const;

 private:
  struct Entry {
    std::vector<Message> history;
    nlohmann::json response;
    Clock::time_point expires;
  };
  void evict(Clock::time_point now);  // expired entries and any beyond max_entries_ (locked)

  const size_t max_entries_;
  const Clock::duration ttl_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::deque<std::string> order_;  // insertion order, oldest first
};

}  // namespace tern::server
