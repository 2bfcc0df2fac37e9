#include "tern/server/response_store.h"

#include <algorithm>

namespace tern::server {

void ResponseStore::put(const std::string& id, std::vector<Message> history,
                        nlohmann::json response) {
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  if (entries_.insert_or_assign(id, Entry{std::move(history), std::move(response), now + ttl_})
          .second)
    order_.push_back(id);
  evict(now);
}

std::optional<nlohmann::json> ResponseStore::response(const std::string& id) {
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  evict(now);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.response.is_null()) return std::nullopt;
  return it->second.response;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  if (entries_.erase(id) == 0) return false;
  std::erase(order_, id);
  return true;
}

std::optional<std::vector<Message>> ResponseStore::get(const std::string& id) {
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  evict(now);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.history;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void ResponseStore::evict(Clock::time_point now) {
  // Entries expire in insertion order (one TTL for all), so the front goes first.
  while (!order_.empty()) {
    auto it = entries_.find(order_.front());
    if (it != entries_.end() && entries_.size() <= max_entries_ && it->second.expires > now) break;
    if (it != entries_.end()) entries_.erase(it);
    order_.pop_front();
  }
}

}  // namespace tern::server
