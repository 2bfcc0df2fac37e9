#pragma once
// The routes that answer at once (no generation): /health, /v1/models,
// /metrics, the demo page, 404/405, CORS preflight, plus the response helpers
// every route uses and the API-key check.
#include <cstdint>
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

// Routes needing auth: everything under /v1/, /metrics, /tokenize and /detokenize.
bool needs_api_key(std::string_view path);

// The POST routes, one table (routes.cpp) for the session's dispatch and for
// handle_simple's 405 on their paths with another method.
enum class PostRoute : uint8_t {
  None,
  Chat,
  Completion,
  Messages,
  Responses,
  Tokenize,
  Detokenize,
  Adapters
};
PostRoute post_route(std::string_view path);

// Answers a request that is not a generation. `rid` names it in logs.
Response handle_simple(ServerContext& ctx, const Request& req, const std::string& rid);

}  // namespace tern::server
