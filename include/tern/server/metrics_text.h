#pragma once
// GET /metrics: the scheduler's metrics and the server's HTTP counters in
// Prometheus text exposition format (version 0.0.4).
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "tern/sched/metrics.h"

namespace tern::server {

// Responses by status code, WebSocket sessions. Thread-safe.
class HttpStats {
 public:
  void count_response(int status);
  std::map<int, uint64_t> responses() const;

  std::atomic<uint64_t> connections{0};     // accepted TCP connections
  std::atomic<int64_t> open_websockets{0};  // gauge
  std::atomic<uint64_t> websocket_messages{0};
  std::atomic<uint64_t> websocket_stalled{0};  // closed for not reading (1008)

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> by_status_;
};

std::string render_metrics(const sched::Metrics& m, const HttpStats& http);

}  // namespace tern::server
