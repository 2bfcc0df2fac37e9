#pragma once
// Session coroutines of the reactor and the helpers they share.
#include <memory>
#include <string>

#include "context.h"
#include "net.h"
#include "tern/server/openai_request.h"

namespace tern::server {

// One HTTP/1.1 connection: keep-alive request loop, limits, routing, and the
// hand-over to a WebSocket session on upgrade.
awaitable<void> run_http_session(ServerContext& ctx, tcp::socket socket);

// A WebSocket session on an already-read upgrade request.
awaitable<void> run_ws_session(ServerContext& ctx, beast::tcp_stream stream, Request upgrade,
                               std::string rid);

class ApiExchange;

// A generation route (POST /v1/chat/completions, /v1/completions,
// /v1/messages, /v1/responses), streaming (SSE) or not; `api` parses and renders.
// Returns whether the connection may be kept alive.
// `client` names the connection for the scheduler's fairness.
awaitable<bool> handle_generation(ServerContext& ctx, beast::tcp_stream& stream, Request req,
                                  const std::string& rid, const std::string& client,
                                  std::unique_ptr<ApiExchange> api);

// Writes a complete response; counts it and logs it with the request id.
// Returns whether the connection may be kept alive.
awaitable<bool> write_response(ServerContext& ctx, beast::tcp_stream& stream, Response res,
                               const std::string& rid, std::string_view what);

// Completes when the peer closes the connection (EOF or reset) while a
// response is being produced; runs until cancelled otherwise.
awaitable<void> watch_peer(tcp::socket& socket);

}  // namespace tern::server
