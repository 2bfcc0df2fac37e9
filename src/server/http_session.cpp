// One coroutine per HTTP connection: read a request (header first, so limits,
// `Expect: 100-continue` and upgrades are handled before the body), answer it,
// repeat while keep-alive. The read deadline is reset before every read.
#include <array>
#include <boost/beast/websocket/rfc6455.hpp>

#include "adapters_route.h"
#include "api_exchange.h"
#include "embeddings_route.h"
#include "kv_events_route.h"
#include "rerank_route.h"
#include "routes.h"
#include "session.h"
#include "tokenize_route.h"

namespace tern::server {
namespace {

// Keeps ctx.busy_exchanges right on every exit path; shutdown waits for zero.
class ExchangeGuard {
 public:
  explicit ExchangeGuard(ServerContext& ctx) : ctx_(ctx) { ++ctx_.busy_exchanges; }
  ~ExchangeGuard() {
    if (--ctx_.busy_exchanges == 0 && ctx_.on_exchange_done) ctx_.on_exchange_done();
  }
  ExchangeGuard(const ExchangeGuard&) = delete;
  ExchangeGuard& operator=(const ExchangeGuard&) = delete;

 private:
  ServerContext& ctx_;
};

// Closes after an error answer while the client may still be sending (a body
// over the limit): stop sending, then read and discard for a short while, so
// the client sees the answer rather than a connection reset.
awaitable<void> linger_close(beast::tcp_stream& stream) {
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::array<char, 16384> scratch;
  size_t discarded = 0;
  stream.expires_after(std::chrono::seconds(2));
  while (discarded < (64u << 20)) {
    auto [rec, n] = co_await stream.async_read_some(net::buffer(scratch), use_nothrow);
    if (rec) break;
    discarded += n;
  }
  stream.close();
}

// A read failed. Answers the errors a client should hear about (then the
// connection closes); stays silent for a closed or idle connection.
awaitable<void> answer_read_error(ServerContext& ctx, beast::tcp_stream& stream,
                                  beast::error_code ec) {
  std::optional<ApiError> err;
  if (ec == http::error::body_limit) {
    err = ApiError(413, "invalid_request_error",
                   "The request body is larger than the limit of " +
                       std::to_string(ctx.opts.body_limit) + " bytes.",
                   {}, "request_too_large");
  } else if (ec == http::error::header_limit) {
    err = ApiError(431, "invalid_request_error", "The request headers are too large.", {},
                   "headers_too_large");
  } else if (ec.category() == beast::error_code(http::error::end_of_stream).category() &&
             ec != http::error::end_of_stream && ec != http::error::partial_message) {
    err = ApiError(400, "invalid_request_error", "Malformed HTTP request: " + ec.message(), {},
                   "bad_request");
  }
  if (!err) co_return;
  Request dummy{http::verb::get, "/", 11};
  dummy.keep_alive(false);
  Response res = error_response(dummy, *err);
  res.keep_alive(false);
  co_await write_response(ctx, stream, std::move(res), "-", "rejected: " + ec.message());
  co_await linger_close(stream);
}

// Reads one request: header, optional 100 Continue, body. Returns ec on failure.
awaitable<beast::error_code> read_request(ServerContext& ctx, beast::tcp_stream& stream,
                                          beast::flat_buffer& buffer,
                                          http::request_parser<http::string_body>& parser) {
  parser.header_limit(uint32_t(std::min<size_t>(ctx.opts.header_limit, UINT32_MAX)));
  parser.body_limit(ctx.opts.body_limit);
  stream.expires_after(std::chrono::seconds(ctx.opts.idle_timeout_s));
  auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, use_nothrow);
  if (ec) co_return ec;
  if (parser.is_done()) co_return beast::error_code{};
  const auto& hdr = parser.get();
  if (auto it = hdr.find(http::field::expect);
      it != hdr.end() && beast::iequals(it->value(), "100-continue")) {
    http::response<http::empty_body> cont{http::status::continue_, hdr.version()};
    stream.expires_after(std::chrono::seconds(ctx.opts.write_timeout_s));
    auto [wec, wn] = co_await http::async_write(stream, cont, use_nothrow);
    if (wec) co_return wec;
  }
  stream.expires_after(std::chrono::seconds(ctx.opts.idle_timeout_s));
  auto [bec, bn] = co_await http::async_read(stream, buffer, parser, use_nothrow);
  co_return bec;
}

// The wire shape of a generation route, or null.
std::unique_ptr<ApiExchange> generation_api(ServerContext& ctx, Route route,
                                            const std::string& rid) {
  switch (route) {
    case Route::Chat:
      return make_openai_exchange(ctx, GenerationRequest::Kind::Chat);
    case Route::Completion:
      return make_openai_exchange(ctx, GenerationRequest::Kind::Completion);
    case Route::Messages:
      return make_anthropic_exchange(ctx, rid);
    case Route::Responses:
      return make_responses_exchange(ctx, rid);
    default:
      return nullptr;
  }
}

}  // namespace

awaitable<bool> write_response(ServerContext& ctx, beast::tcp_stream& stream, Response res,
                               const std::string& rid, std::string_view what) {
  if (ctx.stopping) res.keep_alive(false);
  const bool keep = res.keep_alive();
  const unsigned status = res.result_int();
  ctx.http.count_response(int(status));
  stream.expires_after(std::chrono::seconds(ctx.opts.write_timeout_s));
  auto [ec, n] = co_await http::async_write(stream, res, use_nothrow);
  if (status >= 500)
    ctx.log->warn("[{}] {} -> {}", rid, what, status);
  else if (status >= 400)
    ctx.log->info("[{}] {} -> {}", rid, what, status);
  else
    ctx.log->debug("[{}] {} -> {}", rid, what, status);
  co_return !ec && keep;
}

awaitable<void> watch_peer(tcp::socket& socket) {
  auto [ec] = co_await socket.async_wait(tcp::socket::wait_read, use_nothrow);
  if (ec) co_return;  // cancelled: the response is complete
  beast::error_code aec;
  if (socket.available(aec) == 0 || aec) co_return;  // EOF or reset: the peer is gone
  // Bytes of a pipelined request: leave them to the parser and wait to be cancelled.
  net::steady_timer forever(socket.get_executor(), net::steady_timer::time_point::max());
  co_await forever.async_wait(use_nothrow);
}

awaitable<void> run_http_session(ServerContext& ctx, tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  ctx.http.connections += 1;
  const std::string conn = ctx.next_connection_id();
  for (;;) {
    http::request_parser<http::string_body> parser;
    if (auto ec = co_await read_request(ctx, stream, buffer, parser)) {
      co_await answer_read_error(ctx, stream, ec);
      break;
    }
    ExchangeGuard busy(ctx);
    Request req = parser.release();
    const std::string rid = ctx.next_request_id();
    const std::string_view path = target_path(req.target());
    const std::string what = std::string(req.method_string()) + " " + std::string(path);
    bool keep = false;
    std::optional<Response> refused;  // answered after the try (no co_await in a handler)
    try {
      const bool ws_upgrade = beast::websocket::is_upgrade(req) && path == "/v1/ws";
      // A CORS preflight carries no data and no credentials: answered without the key.
      const bool preflight = req.method() == http::verb::options;
      // Only the WebSocket upgrade may carry the key in the query string (a
      // browser cannot set headers on it); everywhere else it must be a header.
      if (needs_api_key(path) && !preflight) check_api_key(ctx, req, ws_upgrade);
      // Draining: requests that still arrive are told so, not refused a connection.
      if (ctx.stopping && path != "/health")
        throw ApiError(503, "server_error", "The server is shutting down.", {}, "shutting_down");
      if (ws_upgrade) {
        co_await run_ws_session(ctx, std::move(stream), std::move(req), rid);
        co_return;
      }
      // The routes that answer over time (generations, loads, event streams);
      // the rest answer at once (handle_simple), 405s included.
      const RouteSpec* route = find_route(path);
      const bool answers =
          route && route_allows(*route, req.method()) && req.method() != http::verb::options;
      auto is = [&](Route x, http::verb m) {
        return answers && route->route == x && req.method() == m;
      };
      if (auto api = answers && req.method() == http::verb::post
                         ? generation_api(ctx, route->route, rid)
                         : nullptr) {
        keep = co_await handle_generation(ctx, stream, std::move(req), rid, conn, std::move(api));
      } else if (is(Route::Embeddings, http::verb::post)) {
        keep = co_await handle_embeddings(ctx, stream, req, rid, conn);
      } else if (is(Route::Rerank, http::verb::post)) {
        keep = co_await handle_rerank(ctx, stream, req, rid, conn);
      } else if (is(Route::Tokenize, http::verb::post) || is(Route::Detokenize, http::verb::post)) {
        keep = co_await handle_tokenize(ctx, stream, req, rid);
      } else if (is(Route::Adapters, http::verb::post)) {
        keep = co_await handle_adapter_load(ctx, stream, req, rid);
      } else if (is(Route::KvEvents, http::verb::get)) {
        keep = co_await handle_kv_events(ctx, stream, req, rid);
      } else {
        Response res = handle_simple(ctx, req, rid);
        add_cors_headers(ctx, req, res);
        if (req.method() == http::verb::head) {
          const auto len = res.body().size();
          res.body().clear();
          res.content_length(len);
        }
        keep = co_await write_response(ctx, stream, std::move(res), rid, what);
      }
    } catch (const ApiError& e) {
      refused = error_response(req, e);
      add_cors_headers(ctx, req, *refused);
    }
    if (refused) keep = co_await write_response(ctx, stream, std::move(*refused), rid, what);
    if (!keep) break;
  }
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

}  // namespace tern::server
