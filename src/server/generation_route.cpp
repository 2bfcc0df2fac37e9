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

  AnswerStream answer(x.api, x.sub, /*streaming=*/true);
  std::string out = answer.open();
  for (;;) {
    for (size_t i = 0; i < x.sub.streams.size(); ++i)
      if (!answer.ended(i)) out += answer.push(i, x.sub.streams[i]->drain());
    const bool all_ended = answer.all_ended();
    if (all_ended) out += answer.close();
    if (!out.empty()) {
      if (!co_await write_chunk(x, out, chunked)) co_return false;
      out.clear();
      if (all_ended) break;
      continue;  // more may have arrived during the write: drain again before sleeping
    }
    if (!co_await x.waker.wait()) co_return false;
  }
  if (!chunked) co_return false;  // HTTP/1.0: closing the connection ends the body
  x.stream.expires_after(std::chrono::seconds(x.ctx.opts.write_timeout_s));
  auto [ec, n] = co_await net::async_write(x.stream, http::make_chunk_last(), use_nothrow);
  co_return !ec && res.keep_alive();
}

// One JSON body when every choice is complete.
awaitable<bool> pump_whole(Exchange& x) {
  AnswerStream answer(x.api, x.sub, /*streaming=*/false);
  const size_t n = x.sub.streams.size();
  std::vector<ChoiceOutput> out(n);
  std::vector<bool> ended(n, false);
  for (auto& o : out) o.text = x.sub.echo;
  for (;;) {
    bool all_ended = true;
    for (size_t i = 0; i < n; ++i) {
      if (!ended[i]) {
        auto c = x.sub.streams[i]->drain();
        out[i].text += c.text;
        for (auto& lp : c.logprobs) out[i].logprobs.push_back(std::move(lp));
        if (c.finish) ended[i] = true, out[i].finish = std::move(*c.finish);
      }
      all_ended = all_ended && ended[i];
    }
    const sched::Finish* failed = all_ended ? answer.failed(out) : nullptr;
    if (all_ended && failed) {
      Response err = error_response(
          x.req, ApiError(500, "server_error", "Generation failed: " + failed->error));
      add_cors_headers(x.ctx, x.req, err);
      co_return co_await write_response(x.ctx, x.stream, std::move(err), x.rid, "generation");
    }
    if (all_ended) {
      Response res = json_response(x.req, http::status::ok, dump(answer.body(out)));
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
    // Off the reactor thread: the JSON, the chat template and the tokenizer
    // (remote media is fetched on the reactor first, when there is any).
    g = co_await prepare_with_remote_media(ctx, peer_address(stream.socket()),
                                           [&] { return api->parse(parse_json_body(req.body())); });
    if (auto h = req.find("X-Session-Id"); h != req.end()) {
      if (h->value().empty() || h->value().size() > kMaxSessionKey)
        throw ApiError::bad_request("X-Session-Id must be 1 to " + std::to_string(kMaxSessionKey) +
                                    " bytes.");
      g.session = std::string(h->value());
    }
    sub = co_await prepare_generation(ctx, g, rid, client, waker->notifier());
  } catch (const std::exception& e) {
    refused = ApiError::from(e);
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
  bool cancelled = false;
  for (const auto& s : sub.streams) {
    if (s->finished()) continue;
    // The client hung up (or a write failed) before the end: free the slot now.
    if (!cancelled) ctx.log->info("[{}] client went away; cancelling", rid);
    cancelled = true;
    ctx.scheduler.cancel(s);
  }
  co_return false;
}

}  // namespace tern::server
