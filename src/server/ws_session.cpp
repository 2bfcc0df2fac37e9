// GET /v1/ws: many generations at once over one WebSocket, each tagged with
// the client's id. A reader coroutine handles incoming JSON messages; a
// writer coroutine drains every active stream (coalesced text) and the
// outbox whenever it is woken. The protocol is documented in web/PROTOCOL.md.
//
// Backpressure: every frame queued for the client (deltas, pongs, errors)
// counts against a per-connection byte bound (--ws-outbox-kb). While the
// outbox is full the writer stops draining the streams (their text waits in
// each sched::Stream, whose own bound then pauses the generation) and the
// reader stops reading requests. A client whose frames stay unwritten past
// --write-timeout is closed (1008, policy violation) and its generations are
// cancelled. Other connections never wait for it.
#include <algorithm>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <optional>

#include "api_exchange.h"
#include "generation.h"
#include "routes.h"
#include "session.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "waker.h"

namespace tern::server {
namespace {

namespace websocket = beast::websocket;
using namespace net::experimental::awaitable_operators;
using json = nlohmann::json;

constexpr size_t kMaxIdBytes = 128;

class WsSession final : public ShutdownListener {
 public:
  WsSession(ServerContext& ctx, beast::tcp_stream&& stream, std::string rid)
      : ctx_(ctx),
        ws_(std::move(stream)),
        rid_(std::move(rid)),
        client_(ctx.next_connection_id()),
        peer_(peer_address(beast::get_lowest_layer(ws_).socket())),
        waker_(std::make_shared<Waker>(ws_.get_executor())),
        room_(std::make_shared<Waker>(ws_.get_executor())) {}

  awaitable<void> run(Request upgrade);
  void on_shutdown() override {
    closing_ = true;
    waker_->wake();
  }

 private:
  struct Active {
    std::shared_ptr<sched::Stream> stream;
    std::string request_id;
    std::unique_ptr<ApiExchange> exchange;  // parses and renders (ws_exchange.cpp)
    std::unique_ptr<AnswerStream> answer;   // its answer on the way out
  };

  awaitable<void> reader();
  awaitable<bool> read_message(beast::flat_buffer& buf);
  awaitable<void> writer();
  awaitable<void> watchdog();
  void collect();
  void enqueue_lines(const std::string& lines);
  bool outbox_full() const { return outbox_bytes_ >= ctx_.opts.ws_outbox_bytes; }
  void enqueue(std::string frame) {
    outbox_bytes_ += frame.size();
    outbox_.push_back(std::move(frame));
  }
  awaitable<void> handle_text(const std::string& text);
  awaitable<void> on_generate(const json& msg, const std::string& id, bool responses);
  void on_cancel(const std::string& id);
  void send(const json& j) {
    enqueue(dump(j));
    waker_->wake();
  }
  void send_error(const json& id, const ApiError& e) {
    json err = error_body(e)["error"];
    err["status"] = e.status();
    send(json{{"type", "error"}, {"id", id}, {"error", err}});
  }

  ServerContext& ctx_;
  websocket::stream<beast::tcp_stream> ws_;
  std::string rid_;
  std::string client_;  // the scheduler is fair between connections
  std::string peer_;    // the client's address: remote media fetches are limited per address
  std::shared_ptr<Waker> waker_;
  std::shared_ptr<Waker> room_;  // wakes the reader when the outbox has room again
  std::map<std::string, Active> active_;
  std::deque<std::string> outbox_;  // frames not yet written, oldest first
  size_t outbox_bytes_ = 0;
  // When the frame being written was started; nullopt while no write is pending.
  std::optional<std::chrono::steady_clock::time_point> write_since_;
  bool stalled_ = false;  // closed by the watchdog: the client stopped reading
  bool closing_ = false;  // shutdown: close once nothing is active
  bool close_sent_ = false;
  uint64_t n_generations_ = 0;
};

awaitable<void> WsSession::run(Request upgrade) {
  ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws_.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "tern"); }));
  ws_.read_message_max(0);  // read_message enforces --body-limit
  beast::get_lowest_layer(ws_).expires_never();
  auto [ec] = co_await ws_.async_accept(upgrade, use_nothrow);
  if (ec) {
    ctx_.log->info("[{}] WebSocket handshake failed: {}", rid_, ec.message());
    co_return;
  }
  ws_.text(true);
  ctx_.log->info("[{}] WebSocket open", rid_);
  ctx_.listeners.insert(this);
  ctx_.http.open_websockets += 1;
  send(json{{"type", "hello"},
            {"protocol", 1},
            {"model", ctx_.model_id},
            {"n_ctx", ctx_.scheduler.n_ctx()},
            {"max_generations", ctx_.opts.ws_max_generations}});
  co_await (reader() || writer() || watchdog());
  for (auto& [id, a] : active_) ctx_.scheduler.cancel(a.stream);
  if (stalled_) {
    ctx_.http.websocket_stalled += 1;
    ctx_.log->warn(
        "[{}] WebSocket closed (1008 policy violation): the client read nothing for {} s with "
        "{} bytes queued; cancelled {} generations",
        rid_, ctx_.opts.write_timeout_s, outbox_bytes_, active_.size());
    // Best effort: the client is not reading, so the close frame may never arrive.
    beast::get_lowest_layer(ws_).expires_after(std::chrono::seconds(1));
    co_await ws_.async_close(websocket::close_code::policy_error, use_nothrow);
    beast::get_lowest_layer(ws_).close();
  } else if (!active_.empty()) {
    ctx_.log->info("[{}] WebSocket closed: cancelled {} generations", rid_, active_.size());
  }
  ctx_.listeners.erase(this);
  ctx_.http.open_websockets -= 1;
  ctx_.log->info("[{}] WebSocket closed", rid_);
}

awaitable<void> WsSession::reader() {
  for (;;) {
    // Backpressure: read no more requests while the client's frames pile up.
    while (outbox_full())
      if (!co_await room_->wait()) co_return;
    beast::flat_buffer buf;
    if (!co_await read_message(buf)) co_return;
    ctx_.http.websocket_messages += 1;
    if (!ws_.got_text()) {
      send_error(nullptr, ApiError::bad_request("Binary frames are not supported; send JSON text.",
                                                {}, "invalid_frame"));
      continue;
    }
    co_await handle_text(beast::buffers_to_string(buf.data()));
  }
}

// One whole message into `buf`; false once the connection is done. The
// limit (--body-limit) is checked here, chunk by chunk, not by Beast's
// read_message_max: Beast fails the connection with a 1009 close frame and
// tears the socket down at once, so a client still sending the rest of a
// fragmented message gets a reset and never reads that close frame. Here a
// message over the limit is refused by a regular close (1009, message too
// big), which reads and drops whatever the client still sends until its own
// close frame (bounded by the close handshake's timeout).
awaitable<bool> WsSession::read_message(beast::flat_buffer& buf) {
  constexpr size_t kChunk = 64 * 1024;
  const size_t limit = ctx_.opts.body_limit;
  do {
    auto [ec, n] =
        co_await ws_.async_read_some(buf, std::min(kChunk, limit + 1 - buf.size()), use_nothrow);
    if (ec) {
      if (ec != websocket::error::closed)
        ctx_.log->debug("[{}] WebSocket read: {}", rid_, ec.message());
      co_return false;
    }
    if (buf.size() > limit) {
      ctx_.log->info(
          "[{}] WebSocket closed (1009 message too big): a message over {} bytes "
          "(--body-limit)",
          rid_, limit);
      if (!close_sent_) {
        close_sent_ = true;  // the writer sends nothing more
        co_await ws_.async_close(
            websocket::close_reason(websocket::close_code::too_big, "message too big"),
            use_nothrow);
      }
      co_return false;
    }
  } while (!ws_.is_message_done());
  co_return true;
}

// The renderer's messages, one per line, each a frame.
void WsSession::enqueue_lines(const std::string& lines) {
  for (size_t at = 0, nl; at < lines.size(); at = nl + 1) {
    nl = lines.find('\n', at);
    enqueue(lines.substr(at, nl - at));
  }
}

// Moves each stream's news into the outbox, without suspending, while it has room.
void WsSession::collect() {
  for (auto it = active_.begin(); it != active_.end() && !outbox_full();) {
    enqueue_lines(it->second.answer->push(0, it->second.stream->drain()));
    if (it->second.answer->all_ended())
      it = active_.erase(it);
    else
      ++it;
  }
}

awaitable<void> WsSession::writer() {
  for (;;) {
    collect();
    if (close_sent_) {  // nothing may follow a close frame
      outbox_.clear();
      outbox_bytes_ = 0;
    }
    if (!outbox_.empty()) {
      const std::string frame = std::move(outbox_.front());
      outbox_.pop_front();
      write_since_ = std::chrono::steady_clock::now();
      auto [ec, n] = co_await ws_.async_write(net::buffer(frame), use_nothrow);
      write_since_.reset();
      outbox_bytes_ -= frame.size();
      if (ec) co_return;
      if (!outbox_full()) room_->wake();
      continue;
    }
    if (closing_ && active_.empty() && !close_sent_) {
      close_sent_ = true;
      auto [ec] = co_await ws_.async_close(websocket::close_code::going_away, use_nothrow);
      if (ec) co_return;
      continue;  // the reader ends when the peer's close arrives
    }
    if (!co_await waker_->wait()) co_return;
  }
}

// Ends the session when one frame has waited longer than --write-timeout to
// be written: the client has stopped reading.
awaitable<void> WsSession::watchdog() {
  const auto limit = std::chrono::seconds(ctx_.opts.write_timeout_s);
  net::steady_timer tick(ws_.get_executor());
  for (;;) {
    tick.expires_after(
        std::min<std::chrono::steady_clock::duration>(limit, std::chrono::seconds(1)));
    auto [ec] = co_await tick.async_wait(use_nothrow);
    if (ec) co_return;  // the session is ending
    if (write_since_ && std::chrono::steady_clock::now() - *write_since_ >= limit) {
      stalled_ = true;
      beast::get_lowest_layer(ws_).socket().cancel();  // unblocks the pending write
      co_return;
    }
  }
}

awaitable<void> WsSession::handle_text(const std::string& text) {
  const json msg = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded() || !msg.is_object()) {
    send_error(nullptr,
               ApiError::bad_request("The message is not a JSON object.", {}, "invalid_json"));
    co_return;
  }
  const auto type_it = msg.find("type");
  if (type_it == msg.end() || !type_it->is_string()) {
    send_error(nullptr, ApiError::bad_request("Missing required parameter: 'type' (a string).",
                                              "type", "missing_required_parameter"));
    co_return;
  }
  const std::string type = type_it->get<std::string>();
  if (type == "ping") {
    send(json{{"type", "pong"}});
    co_return;
  }
  const auto id_it = msg.find("id");
  if (id_it == msg.end() || !id_it->is_string() || id_it->get<std::string>().empty() ||
      id_it->get<std::string>().size() > kMaxIdBytes) {
    send_error(id_it == msg.end() ? json(nullptr) : *id_it,
               ApiError::bad_request("'id' must be a non-empty string of at most " +
                                         std::to_string(kMaxIdBytes) + " bytes.",
                                     "id", "invalid_value"));
    co_return;
  }
  const std::string id = id_it->get<std::string>();
  if (type == "generate" || type == "responses") {
    co_await on_generate(msg, id, type == "responses");
  } else if (type == "cancel") {
    on_cancel(id);
  } else {
    send_error(id,
               ApiError::bad_request("Unknown message type '" + type +
                                         "'. Expected 'generate', 'responses', 'cancel' or 'ping'.",
                                     "type", "invalid_value"));
  }
}

// `generate` (chat or completion fields) or `responses` (the Responses API's
// fields: input, instructions, previous_response_id, ...).
awaitable<void> WsSession::on_generate(const json& msg, const std::string& id, bool responses) {
  try {
    if (active_.count(id))
      throw ApiError::bad_request("A generation with id '" + id + "' is already running.", "id",
                                  "duplicate_id");
    if (int(active_.size()) >= ctx_.opts.ws_max_generations)
      throw ApiError(429, "rate_limit_exceeded",
                     "Too many generations on this socket (at most " +
                         std::to_string(ctx_.opts.ws_max_generations) + ").",
                     {}, "too_many_generations");
    const std::string request_id = rid_ + "." + std::to_string(++n_generations_);
    std::unique_ptr<ApiExchange> exchange = make_ws_exchange(ctx_, id, request_id, responses);
    // Off the reactor thread: validation, the chat template and the tokenizer.
    // (Remote media is fetched on the reactor first, when there is any.)
    GenerationRequest g =
        co_await prepare_with_remote_media(ctx_, peer_, [&] { return exchange->parse(msg); });
    // The connection is the session unless the message names one (`user`).
    if (g.session.empty()) g.session = client_;
    Submission sub = co_await prepare_generation(ctx_, g, request_id, client_, waker_->notifier());
    const auto cs = co_await net::this_coro::cancellation_state;
    if (cs.cancelled() != net::cancellation_type::none) {  // the session ended meanwhile
      ctx_.scheduler.cancel(sub.stream);
      co_return;
    }
    ctx_.log->info("[{}] generate id={} prompt={} tokens max_tokens={}", request_id,
                   id.substr(0, 32), sub.prompt_tokens, g.params.max_tokens);
    auto answer = std::make_unique<AnswerStream>(*exchange, sub, /*streaming=*/true);
    enqueue_lines(answer->open());
    waker_->wake();
    active_[id] = Active{sub.stream, request_id, std::move(exchange), std::move(answer)};
  } catch (const std::exception& e) {
    send_error(id, ApiError::from(e));
  }
}

void WsSession::on_cancel(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) {
    send_error(id, ApiError::not_found("No running generation has id '" + id + "'."));
    return;
  }
  ctx_.log->info("[{}] cancel requested", it->second.request_id);
  ctx_.scheduler.cancel(it->second.stream);  // its "done" (cancelled) follows
}

}  // namespace

awaitable<void> run_ws_session(ServerContext& ctx, beast::tcp_stream stream, Request upgrade,
                               std::string rid) {
  WsSession s(ctx, std::move(stream), std::move(rid));
  co_await s.run(std::move(upgrade));
}

}  // namespace tern::server
