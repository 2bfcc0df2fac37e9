// Every generation route (OpenAI chat and completions, Responses, Anthropic
// Messages): the request's ApiExchange parses and renders, this file runs the
// exchange. The response is produced
// while a watcher waits for the client to hang up: if it does, the request is
// cancelled at once (the scheduler frees its sequence at the next token
// boundary) instead of being noticed by a later failed write.
#include <boost/asio/experimental/awaitable_operators.hpp>

#include "api_exchange.h"
#include "generation.h"
#include "routes.h"
#include "session.h"
#include "tern/sched/scheduler.h"
#include "waker.h"

namespace tern::server {
namespace {

using namespace net::experimental::awaitable_operators;
using json = nlohmann::json;

struct Exchange {
  ServerContext& ctx;
  beast::tcp_stream& stream;
  const Request& req;
  const std::string& rid;
  const GenerationRequest& g;
  Submission& sub;
  ApiExchange& api;
  Waker& waker;
};

// HTTP/1.1 frames the event stream in chunks; HTTP/1.0 has no chunked coding,
// so a 1.0 client gets the bytes unframed and the end of the body is the
// connection closing.
awaitable<bool> write_chunk(Exchange& x, const std::string& data, bool chunked) {
  x.stream.expires_after(std::chrono::seconds(x.ctx.opts.write_timeout_s));
  auto [ec, n] = chunked ? co_await net::async_write(x.stream, http::make_chunk(net::buffer(data)),
                                                     use_nothrow)
                         : co_await net::async_write(x.stream, net::buffer(data), use_nothrow);
  co_return !ec;
}

// Server-sent events in the wire format of the request's API.
awaitable<bool> pump_sse(Exchange& x) {
  http::response<http::empty_body> res{http::status::ok, x.req.version()};
  res.set(http::field::server, "tern");
  res.set(http::field::content_type, "text/event-stream; charset=utf-8");
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");
  res.set("X-Request-Id", x.rid);
  add_cors_headers(x.ctx, x.req, res);
  const bool chunked = x.req.version() >= 11;
  res.keep_alive(chunked && x.req.keep_alive() && !x.ctx.stopping);
  res.chunked(chunked);
  http::response_serializer<http::empty_body> sr{res};
  x.ctx.http.count_response(200);
  x.stream.expires_after(std::chrono::seconds(x.ctx.opts.write_timeout_s));
  if (auto [ec, n] = co_await http::async_write_header(x.stream, sr, use_nothrow); ec)
    co_return false;

  std::string out = x.api.start(x.sub);
  if (!x.sub.echo.empty()) out += x.api.stream_text(x.sub.echo);
  for (;;) {
    auto c = x.sub.stream->drain();
    if (!c.text.empty()) out += x.api.stream_text(c.text);
    if (c.finish) out += x.api.stream_end(*c.finish);
    if (!out.empty()) {
      if (!co_await write_chunk(x, out, chunked)) co_return false;
      out.clear();
      if (c.finish) break;
      continue;  // more may have arrived during the write: drain again before sleeping
    }
    if (!co_await x.waker.wait()) co_return false;
  }
  if (!chunked) co_return false;  // HTTP/1.0: closing the connection ends the body
  x.stream.expires_after(std::chrono::seconds(x.ctx.opts.write_timeout_s));
  auto [ec, n] = co_await net::async_write(x.stream, http::make_chunk_last(), use_nothrow);
  co_return !ec && res.keep_alive();
}

// One JSON body when the generation is complete.
awaitable<bool> pump_whole(Exchange& x) {
  x.api.start(x.sub);
  std::string text = x.sub.echo;
  for (;;) {
    auto c = x.sub.stream->drain();
    text += c.text;
    if (c.finish) {
      if (c.finish->reason == sched::FinishReason::Error) {
        Response err = error_response(
            x.req, ApiError(500, "server_error", "Generation failed: " + c.finish->error));
        add_cors_headers(x.ctx, x.req, err);
        co_return co_await write_response(x.ctx, x.stream, std::move(err), x.rid, "generation");
      }
      Response res = json_response(x.req, http::status::ok, dump(x.api.body(text, *c.finish)));
      res.set("X-Request-Id", x.rid);
      add_cors_headers(x.ctx, x.req, res);
      co_return co_await write_response(x.ctx, x.stream, std::move(res), x.rid, "generation");
    }
    if (!co_await x.waker.wait()) co_return false;
  }
}

}  // namespace

awaitable<bool> handle_generation(ServerContext& ctx, beast::tcp_stream& stream, Request req,
                                  const std::string& rid, const std::string& client,
                                  std::unique_ptr<ApiExchange> api) {
  // The path only: a query string may carry a secret and is never logged.
  const std::string what =
      std::string(req.method_string()) + " " + std::string(target_path(req.target()));
  auto waker = std::make_shared<Waker>(stream.get_executor());
  GenerationRequest g;
  Submission sub;
  std::optional<ApiError> refused;
  try {
    // Off the reactor thread: the JSON, the chat template and the tokenizer.
    g = co_await net::co_spawn(
        ctx.prep,
        [&]() -> awaitable<GenerationRequest> {
          co_return api->parse(parse_json_body(req.body()));
        },
        net::use_awaitable);
    sub = co_await prepare_generation(ctx, g, rid, client, waker->notifier());
  } catch (const ApiError& e) {
    refused = e;
  } catch (const InvalidArgument& e) {
    refused = ApiError::bad_request(e.what());
  } catch (const std::exception& e) {
    refused = ApiError(500, "server_error", std::string("Internal error: ") + e.what());
  }
  if (refused) {
    Response res = error_response(req, *refused);
    add_cors_headers(ctx, req, res);
    co_return co_await write_response(ctx, stream, std::move(res), rid, what);
  }

  ctx.log->info("[{}] {} prompt={} tokens stream={} max_tokens={}", rid, what, sub.prompt_tokens,
                g.stream, g.params.max_tokens);
  Exchange x{ctx, stream, req, rid, g, sub, *api, *waker};
  awaitable<bool> pump = g.stream ? pump_sse(x) : pump_whole(x);
  auto outcome = co_await (std::move(pump) || watch_peer(stream.socket()));
  if (outcome.index() == 0 && std::get<0>(outcome)) co_return true;  // answered, keep-alive
  if (!sub.stream->finished()) {
    // The client hung up (or a write failed) before the end: free the slot now.
    ctx.log->info("[{}] client went away; cancelling", rid);
    ctx.scheduler.cancel(sub.stream);
  }
  co_return false;
}

}  // namespace tern::server
