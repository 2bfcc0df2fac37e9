#pragma once
// The routes that answer at once (no generation): /health, /v1/models,
// /metrics, the demo page, 404/405, CORS preflight, plus the response helpers
// every route uses and the API-key check.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "context.h"
#include "net.h"
#include "tern/server/api_error.h"

namespace tern::server {

// The path of a request target, without the query.
std::string_view target_path(std::string_view target);
// The value of `key` in the target's query string ("" if absent; no decoding).
std::string query_param(std::string_view target, std::string_view key);

Response make_response(const Request& req, http::status status, std::string body,
                       std::string_view content_type);
Response json_response(const Request& req, http::status status, std::string body);
// In the error shape of the API `req` addresses (Anthropic's on /v1/messages,
// OpenAI's everywhere else).
Response error_response(const Request& req, const ApiError& e);

// CORS: when the request's Origin is one of --cors-origin (or it is "*"),
// allows it in `res` (a preflight, OPTIONS, also gets the allowed methods and
// headers); otherwise adds nothing (same-origin only, the default).
void add_cors_headers(const ServerContext& ctx, const Request& req, http::fields& res);

// Whether the request may use the API: no key configured, or
// "Authorization: Bearer <key>" (or "x-api-key: <key>" on /v1/messages); `allow_query`: the
// WebSocket upgrade of /v1/ws may pass ?api_key=<key> instead (browsers cannot set headers on it),
// and nothing else may. Throws ApiError 401 otherwise.
void check_api_key(const ServerContext& ctx, const Request& req, bool allow_query);

// Every route the server answers, in one table (routes.cpp): the session
// dispatches on it and checks the API key by it, a method it does not list
// gets 405 with its Allow header, and a unit test holds README's route list
// to it. Static files (the demo page) are the fallback for GET outside /v1/.
enum class Route : uint8_t {
  Health,
  Metrics,
  Models,
  Model,  // /v1/models/{id}
  Chat,
  Completion,
  Responses,
  StoredResponse,  // /v1/responses/{id}
  Messages,
  Embeddings,
  Rerank,
  Tokenize,
  Detokenize,
  Adapters,
  Adapter,  // /v1/adapters/{name}
  KvEvents,
  WebSocket,
};

struct RouteSpec {
  Route route;
  std::string_view path;  // with `prefix`, ends in '/' and the rest is an id
  bool prefix;
  std::string_view methods;  // what it answers, as an Allow header: "GET, DELETE"
  bool needs_key;            // behind --api-key
};

std::span<const RouteSpec> route_table();
// The route for a path (nullptr: none; an id after a prefix must be non-empty).
const RouteSpec* find_route(std::string_view path);
// Whether the route answers `method` (HEAD wherever GET; OPTIONS, a CORS
// preflight, everywhere).
bool route_allows(const RouteSpec& r, http::verb method);
// 405 naming the methods the route answers, with its Allow header.
Response method_not_allowed(const Request& req, const RouteSpec& r);
// Routes needing the key: the table's, and any other path under /v1/ (an
// unknown /v1/ path answers 401 before 404, so it reveals nothing).
bool needs_api_key(std::string_view path);

// Answers a request that is not a generation. `rid` names it in logs.
Response handle_simple(ServerContext& ctx, const Request& req, const std::string& rid);

}  // namespace tern::server
