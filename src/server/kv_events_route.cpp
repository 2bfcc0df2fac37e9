// GET /v1/kv/events (see kv_events_route.h). The engine thread appends to the
// engine's KvEventLog; this route reads it in batches on a 200 ms timer, so a
// busy cache costs one message per interval, not one per block.
#include "kv_events_route.h"

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

#include "routes.h"
#include "session.h"
#include "tern/core/sha256.h"
#include "tern/engine/engine.h"
#include "tern/kv/kv_events.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
constexpr auto kInterval = std::chrono::milliseconds(200);
constexpr auto kKeepAlive = std::chrono::seconds(15);
constexpr size_t kMaxBatch = 1024;

json event_json(const kv::KvEventLog::Entry& e, int block_size) {
  const char* medium = e.on_flash ? "flash" : "dram";
  if (e.kind == kv::KvEventKind::Removed) {
    return {{"type", "BlockRemoved"},
            {"seq", e.seq},
            {"ts", e.ts},
            {"block_hashes", json::array({to_hex(e.hash)})},
            {"medium", medium}};
  }
  json j{{"type", "BlockStored"},
         {"seq", e.seq},
         {"ts", e.ts},
         {"block_hashes", json::array({to_hex(e.hash)})},
         {"parent_block_hash", nullptr},
         {"token_ids", e.tokens},
         {"block_size", block_size},
         {"lora_id", nullptr},
         {"medium", medium}};
  if (e.parent != kv::BlockHash{}) j["parent_block_hash"] = to_hex(e.parent);
  return j;
}

// {"events": [...], "last_seq": N, "lost": K}; advances `after`.
json batch(const kv::KvEventLog& log, uint64_t& after) {
  uint64_t lost = 0;
  const auto entries = log.read(after, kMaxBatch, &lost);
  json events = json::array();
  for (const auto& e : entries) events.push_back(event_json(e, log.block_tokens()));
  if (!entries.empty()) after = entries.back().seq;
  return {{"events", std::move(events)}, {"last_seq", after}, {"lost", lost}};
}

// ?since=SEQ: a decimal event number no later than the log's last one (event
// numbers restart at 1 with the server, so a larger one is a stale cursor).
uint64_t since_param(const Request& req, const kv::KvEventLog& log) {
  const std::string s = query_param(req.target(), "since");
  if (s.empty()) return 0;
  uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw ApiError::bad_request(
        "Invalid value for 'since': expected an event number (a decimal integer from 0 to " +
            std::to_string(std::numeric_limits<uint64_t>::max()) + "), got '" + s + "'.",
        "since", "invalid_value");
  const uint64_t last = log.last_seq();
  if (v > last)
    throw ApiError::bad_request("Invalid value for 'since': " + s + " is after the last event (" +
                                    std::to_string(last) +
                                    "). Event numbers restart at 1 when the server restarts; "
                                    "resume with since=0.",
                                "since", "invalid_value");
  return v;
}

// ?stream=true|false (also 1|0); absent: true.
bool stream_param(const Request& req) {
  const std::string s = query_param(req.target(), "stream");
  if (s.empty() || s == "true" || s == "1") return true;
  if (s == "false" || s == "0") return false;
  throw ApiError::bad_request(
      "Invalid value for 'stream': expected true or false, got '" + s + "'.", "stream",
      "invalid_value");
}

awaitable<bool> write_data(ServerContext& ctx, beast::tcp_stream& stream, const std::string& data) {
  stream.expires_after(std::chrono::seconds(ctx.opts.write_timeout_s));
  auto [ec, n] =
      co_await net::async_write(stream, http::make_chunk(net::buffer(data)), use_nothrow);
  co_return !ec;
}

}  // namespace

awaitable<bool> handle_kv_events(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                                 const std::string& rid) {
  const kv::KvEventLog& log = ctx.engine.kv_events();
  const bool streaming = stream_param(req);
  uint64_t after = since_param(req, log);
  if (!streaming) {
    Response res = json_response(req, http::status::ok, batch(log, after).dump());
    add_cors_headers(ctx, req, res);
    co_return co_await write_response(ctx, stream, std::move(res), rid, "GET /v1/kv/events");
  }
  if (req.version() < 11)
    throw ApiError::bad_request("GET /v1/kv/events streams over HTTP/1.1 (or use ?stream=false).",
                                "stream", "unsupported_value");
  http::response<http::empty_body> res{http::status::ok, req.version()};
  res.set(http::field::server, "tern");
  res.set(http::field::content_type, "text/event-stream; charset=utf-8");
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");
  add_cors_headers(ctx, req, res);
  res.keep_alive(false);  // the stream ends only with the connection (or the server's drain)
  res.chunked(true);
  http::response_serializer<http::empty_body> sr{res};
  ctx.http.count_response(200);
  stream.expires_after(std::chrono::seconds(ctx.opts.write_timeout_s));
  if (auto [ec, n] = co_await http::async_write_header(stream, sr, use_nothrow); ec)
    co_return false;
  ctx.log->info("[{}] kv events stream from event {}", rid, after + 1);
  net::steady_timer timer(stream.get_executor());
  auto quiet = std::chrono::steady_clock::now();
  while (!ctx.stopping) {
    if (log.last_seq() > after) {
      const json b = batch(log, after);
      if (!co_await write_data(ctx, stream,
                               "id: " + std::to_string(after) + "\ndata: " + b.dump() + "\n\n"))
        co_return false;
      quiet = std::chrono::steady_clock::now();
      continue;  // a full batch may leave more behind
    }
    if (std::chrono::steady_clock::now() - quiet > kKeepAlive) {
      if (!co_await write_data(ctx, stream, ": keep-alive\n\n")) co_return false;
      quiet = std::chrono::steady_clock::now();
    }
    timer.expires_after(kInterval);
    co_await timer.async_wait(use_nothrow);
  }
  stream.expires_after(std::chrono::seconds(ctx.opts.write_timeout_s));
  co_await net::async_write(stream, http::make_chunk_last(), use_nothrow);
  co_return false;
}

}  // namespace tern::server
