// GET /v1/ws: many generations at once over one WebSocket, each tagged with
// the client's id. A reader coroutine handles incoming JSON messages; a
// writer coroutine drains every active stream (coalesced text) and the
// outbox whenever it is woken. The protocol is documented in web/PROTOCOL.md.
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <map>

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
        waker_(std::make_shared<Waker>(ws_.get_executor())) {}

  awaitable<void> run(Request upgrade);
  void on_shutdown() override {
    closing_ = true;
    waker_->wake();
  }

 private:
  struct Active {
    std::shared_ptr<sched::Stream> stream;
    std::string request_id;
  };

  awaitable<void> reader();
  awaitable<void> writer();
  void collect(std::vector<std::string>& out);
  void handle_text(const std::string& text);
  void on_generate(const json& msg, const std::string& id);
  void on_cancel(const std::string& id);
  void send(const json& j) {
    outbox_.push_back(dump(j));
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
  std::shared_ptr<Waker> waker_;
  std::map<std::string, Active> active_;
  std::deque<std::string> outbox_;
  bool closing_ = false;  // shutdown: close once nothing is active
  bool close_sent_ = false;
  uint64_t n_generations_ = 0;
};

awaitable<void> WsSession::run(Request upgrade) {
  ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws_.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "tern"); }));
  ws_.read_message_max(ctx_.opts.body_limit);
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
  co_await (reader() || writer());
  for (auto& [id, a] : active_) ctx_.scheduler.cancel(a.stream);
  if (!active_.empty())
    ctx_.log->info("[{}] WebSocket closed: cancelled {} generations", rid_, active_.size());
  ctx_.listeners.erase(this);
  ctx_.http.open_websockets -= 1;
  ctx_.log->info("[{}] WebSocket closed", rid_);
}

awaitable<void> WsSession::reader() {
  for (;;) {
    beast::flat_buffer buf;
    auto [ec, n] = co_await ws_.async_read(buf, use_nothrow);
    if (ec) {
      if (ec != websocket::error::closed)
        ctx_.log->debug("[{}] WebSocket read: {}", rid_, ec.message());
      co_return;
    }
    ctx_.http.websocket_messages += 1;
    if (!ws_.got_text()) {
      send_error(nullptr, ApiError::bad_request("Binary frames are not supported; send JSON text.",
                                                {}, "invalid_frame"));
      continue;
    }
    handle_text(beast::buffers_to_string(buf.data()));
  }
}

// Everything ready to send, without suspending: the outbox, then each stream's news.
void WsSession::collect(std::vector<std::string>& out) {
  while (!outbox_.empty()) {
    out.push_back(std::move(outbox_.front()));
    outbox_.pop_front();
  }
  for (auto it = active_.begin(); it != active_.end();) {
    auto c = it->second.stream->drain();
    if (!c.text.empty() || c.n_tokens > 0)
      out.push_back(dump(
          json{{"type", "delta"}, {"id", it->first}, {"text", c.text}, {"tokens", c.n_tokens}}));
    if (!c.finish) {
      ++it;
      continue;
    }
    json done = {{"type", "done"},
                 {"id", it->first},
                 {"finish_reason", sched::to_string(c.finish->reason)},
                 {"usage", usage_json(c.finish->usage)},
                 {"timings", timings_json(c.finish->timings)}};
    if (!c.finish->error.empty()) done["error"] = c.finish->error;
    out.push_back(dump(done));
    it = active_.erase(it);
  }
}

awaitable<void> WsSession::writer() {
  std::vector<std::string> batch;
  for (;;) {
    batch.clear();
    collect(batch);
    if (close_sent_) batch.clear();  // nothing may follow a close frame
    for (const auto& m : batch) {
      auto [ec, n] = co_await ws_.async_write(net::buffer(m), use_nothrow);
      if (ec) co_return;
    }
    if (!batch.empty()) continue;
    if (closing_ && active_.empty() && !close_sent_) {
      close_sent_ = true;
      auto [ec] = co_await ws_.async_close(websocket::close_code::going_away, use_nothrow);
      if (ec) co_return;
      continue;  // the reader ends when the peer's close arrives
    }
    if (!co_await waker_->wait()) co_return;
  }
}

void WsSession::handle_text(const std::string& text) {
  const json msg = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded() || !msg.is_object()) {
    send_error(nullptr,
               ApiError::bad_request("The message is not a JSON object.", {}, "invalid_json"));
    return;
  }
  const auto type_it = msg.find("type");
  if (type_it == msg.end() || !type_it->is_string()) {
    send_error(nullptr, ApiError::bad_request("Missing required parameter: 'type' (a string).",
                                              "type", "missing_required_parameter"));
    return;
  }
  const std::string type = type_it->get<std::string>();
  if (type == "ping") {
    send(json{{"type", "pong"}});
    return;
  }
  const auto id_it = msg.find("id");
  if (id_it == msg.end() || !id_it->is_string() || id_it->get<std::string>().empty() ||
      id_it->get<std::string>().size() > kMaxIdBytes) {
    send_error(id_it == msg.end() ? json(nullptr) : *id_it,
               ApiError::bad_request("'id' must be a non-empty string of at most " +
                                         std::to_string(kMaxIdBytes) + " bytes.",
                                     "id", "invalid_value"));
    return;
  }
  const std::string id = id_it->get<std::string>();
  if (type == "generate") {
    on_generate(msg, id);
  } else if (type == "cancel") {
    on_cancel(id);
  } else {
    send_error(id, ApiError::bad_request("Unknown message type '" + type +
                                             "'. Expected 'generate', 'cancel' or 'ping'.",
                                         "type", "invalid_value"));
  }
}

void WsSession::on_generate(const json& msg, const std::string& id) {
  try {
    if (active_.count(id))
      throw ApiError::bad_request("A generation with id '" + id + "' is already running.", "id",
                                  "duplicate_id");
    if (int(active_.size()) >= ctx_.opts.ws_max_generations)
      throw ApiError(429, "rate_limit_exceeded",
                     "Too many generations on this socket (at most " +
                         std::to_string(ctx_.opts.ws_max_generations) + ").",
                     {}, "too_many_generations");
    const std::vector<std::string> own = {"type", "id"};
    const GenerationRequest g =
        msg.contains("prompt") ? parse_completion_request(msg, own) : parse_chat_request(msg, own);
    const std::string request_id = rid_ + "." + std::to_string(++n_generations_);
    Submission sub = submit_generation(ctx_, g, request_id, waker_->notifier());
    ctx_.log->info("[{}] generate id={} prompt={} tokens max_tokens={}", request_id,
                   id.substr(0, 32), sub.prompt_tokens, g.params.max_tokens);
    send(json{{"type", "start"},
              {"id", id},
              {"request_id", request_id},
              {"model", ctx_.model_id},
              {"prompt_tokens", sub.prompt_tokens}});
    if (!sub.echo.empty())
      send(json{{"type", "delta"}, {"id", id}, {"text", sub.echo}, {"tokens", 0}});
    active_[id] = Active{sub.stream, request_id};
  } catch (const ApiError& e) {
    send_error(id, e);
  } catch (const InvalidArgument& e) {
    send_error(id, ApiError::bad_request(e.what()));
  } catch (const std::exception& e) {
    send_error(id, ApiError(500, "server_error", std::string("Internal error: ") + e.what()));
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
