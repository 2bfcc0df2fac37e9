#include "routes.h"

#include <nlohmann/json.hpp>

#include "adapters_route.h"
#include "tern/core/memory_budget.h"
#include "tern/engine/engine.h"
#include "tern/kernels/ops.h"
#include "tern/model/pooling.h"
#include "tern/sched/scheduler.h"
#include "tern/server/anthropic_messages.h"
#include "tern/server/openai_bodies.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

// Constant-time comparison: the key must not leak through timing.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

Response health(ServerContext& ctx, const Request& req) {
  if (ctx.stopping)
    return json_response(req, http::status::service_unavailable,
                         dump(json{{"status", "shutting down"}}));
  return json_response(req, http::status::ok, dump(json{{"status", "ok"}}));
}

// The memory budget's use now (--mem-budget-mb; /metrics has the peaks).
json memory_status(const ServerContext& ctx) {
  const MemoryBudget* b = ctx.engine.memory_budget();
  if (!b) return nullptr;
  const MemoryBudgetStats s = b->stats();
  json used = json::object();
  for (int p = 0; p < kMemPools; ++p) used[mem_pool_name(MemPool(p))] = s.used[p];
  return {{"budget_bytes", s.total}, {"used_bytes", used}};
}

json model_object(const ServerContext& ctx) {
  return {{"id", ctx.model_id},
          {"object", "model"},
          {"created", ctx.created},
          {"owned_by", "tern"},
          // Every model tern serves embeds too (POST /v1/embeddings), pooled so,
          // but a reranker (pooling rank), which ranks (POST /v1/rerank)
          // instead; the models that only embed (encoders, EmbeddingGemma)
          // do not complete.
          {"capabilities",
           {{"vision", ctx.media.vision()},
            {"audio", ctx.media.audio()},
            {"embeddings", ctx.opts.pooling != Pooling::Rank},
            {"rerank", ctx.engine.rank_head() != nullptr},
            {"completion", ctx.engine.config().generates()}}},
          {"meta",
           {{"n_ctx", ctx.scheduler.n_ctx()},
            {"n_vocab", ctx.engine.n_vocab()},
            {"arch", ctx.engine.config().arch},
            {"pooling", to_string(ctx.opts.pooling)},
            {"kernels", kernels::kernel_isa()},
            {"memory", memory_status(ctx)}}}};
}

Response models(ServerContext& ctx, const Request& req) {
  json data = json::array({model_object(ctx)});
  for (auto& m : adapter_model_objects(ctx, model_object(ctx))) data.push_back(std::move(m));
  return json_response(req, http::status::ok, dump(json{{"object", "list"}, {"data", data}}));
}

// GET /v1/models/{id}: the SDK's models.retrieve.
Response model(ServerContext& ctx, const Request& req, std::string_view id) {
  if (id == ctx.model_id) return json_response(req, http::status::ok, dump(model_object(ctx)));
  for (auto& m : adapter_model_objects(ctx, model_object(ctx))) {  // "<base>:<adapter>"
    if (m["id"] == id) return json_response(req, http::status::ok, dump(m));
  }
  return error_response(req, ApiError(404, "invalid_request_error",
                                      "The model '" + std::string(id) + "' does not exist.",
                                      "model", "model_not_found"));
}

// GET / DELETE /v1/responses/{id}: a stored response (the SDK's
// responses.retrieve and responses.delete).
Response stored_response(ServerContext& ctx, const Request& req, std::string_view id) {
  const std::string key(id);
  auto not_found = [&] {
    return error_response(
        req, ApiError(404, "invalid_request_error", "Response with id '" + key + "' not found.",
                      "response_id", "response_not_found"));
  };
  if (req.method() == http::verb::delete_) {
    if (!ctx.responses.erase(key)) return not_found();
    return json_response(req, http::status::ok,
                         dump(json{{"id", key}, {"object", "response"}, {"deleted", true}}));
  }
  auto r = ctx.responses.response(key);
  if (!r) return not_found();
  return json_response(req, http::status::ok, dump(*r));
}

}  // namespace

std::string_view target_path(std::string_view target) {
  const size_t q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

std::string query_param(std::string_view target, std::string_view key) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view kv = rest.substr(0, amp);
    const size_t eq = kv.find('=');
    if (kv.substr(0, eq) == key)
      return eq == std::string_view::npos ? "" : std::string(kv.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return {};
}

Response make_response(const Request& req, http::status status, std::string body,
                       std::string_view content_type) {
  Response res{status, req.version()};
  res.set(http::field::server, "tern");
  res.set(http::field::content_type, content_type);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response json_response(const Request& req, http::status status, std::string body) {
  return make_response(req, status, std::move(body), "application/json");
}

Response error_response(const Request& req, const ApiError& e) {
  // Each API's clients parse their own error shape.
  const json body =
      target_path(req.target()) == "/v1/messages" ? anthropic_error_body(e) : error_body(e);
  Response res = json_response(req, http::int_to_status(unsigned(e.status())), dump(body));
  if (e.status() == 401) res.set(http::field::www_authenticate, "Bearer");
  if (e.status() == 429 || e.status() == 503) res.set(http::field::retry_after, "1");
  return res;
}

void add_cors_headers(const ServerContext& ctx, const Request& req, http::fields& res) {
  const auto it = req.find(http::field::origin);
  if (it == req.end() || ctx.opts.cors_origins.empty()) return;
  const std::string_view origin = it->value();
  bool allowed = false;
  for (const std::string& o : ctx.opts.cors_origins) {
    if (o == "*") {
      res.set(http::field::access_control_allow_origin, "*");
      allowed = true;
      break;
    }
    if (o == origin) {
      res.set(http::field::access_control_allow_origin, origin);
      res.set(http::field::vary, "Origin");
      allowed = true;
      break;
    }
  }
  // A preflight from an allowed origin learns what the real request may use;
  // any other gets no CORS headers at all, so the browser refuses it.
  if (allowed && req.method() == http::verb::options) {
    res.set(http::field::access_control_allow_methods, "GET, POST, DELETE, OPTIONS");
    res.set(http::field::access_control_allow_headers, "Authorization, Content-Type, X-Api-Key");
    res.set(http::field::access_control_max_age, "86400");
  }
}

std::span<const RouteSpec> route_table() {
  using R = Route;
  static constexpr RouteSpec kRoutes[] = {
      {R::Health, "/health", false, "GET", false},
      {R::Metrics, "/metrics", false, "GET", true},
      {R::Models, "/v1/models", false, "GET", true},
      {R::Model, "/v1/models/", true, "GET", true},
      {R::Chat, "/v1/chat/completions", false, "POST", true},
      {R::Completion, "/v1/completions", false, "POST", true},
      {R::Responses, "/v1/responses", false, "POST", true},
      {R::StoredResponse, "/v1/responses/", true, "GET, DELETE", true},
      {R::Messages, "/v1/messages", false, "POST", true},
      {R::Embeddings, "/v1/embeddings", false, "POST", true},
      // llama.cpp's four spellings, and Cohere's v2 path.
      {R::Rerank, "/v1/rerank", false, "POST", true},
      {R::Rerank, "/v2/rerank", false, "POST", true},
      {R::Rerank, "/rerank", false, "POST", true},
      {R::Rerank, "/v1/reranking", false, "POST", true},
      {R::Rerank, "/reranking", false, "POST", true},
      {R::Tokenize, "/tokenize", false, "POST", true},
      {R::Detokenize, "/detokenize", false, "POST", true},
      {R::Adapters, "/v1/adapters", false, "GET, POST", true},
      {R::Adapter, "/v1/adapters/", true, "DELETE", true},
      {R::KvEvents, "/v1/kv/events", false, "GET", true},
      {R::WebSocket, "/v1/ws", false, "GET", true},
  };
  return kRoutes;
}

const RouteSpec* find_route(std::string_view path) {
  for (const RouteSpec& r : route_table()) {
    if (r.prefix ? path.size() > r.path.size() && path.starts_with(r.path) : path == r.path)
      return &r;
  }
  return nullptr;
}

bool route_allows(const RouteSpec& r, http::verb method) {
  if (method == http::verb::options) return true;
  const std::string_view name =
      method == http::verb::head ? "GET" : std::string_view(http::to_string(method));
  for (std::string_view rest = r.methods; !rest.empty();) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 2);
  }
  return false;
}

Response method_not_allowed(const Request& req, const RouteSpec& r) {
  Response res = error_response(
      req,
      ApiError(405, "invalid_request_error",
               "Method " + std::string(req.method_string()) + " is not allowed on " +
                   std::string(target_path(req.target())) + "; use " + std::string(r.methods) + ".",
               {}, "method_not_allowed"));
  res.set(http::field::allow, r.methods);
  return res;
}

bool needs_api_key(std::string_view path) {
  if (const RouteSpec* r = find_route(path)) return r->needs_key;
  return path.starts_with("/v1/");
}

void check_api_key(const ServerContext& ctx, const Request& req, bool allow_query) {
  if (ctx.opts.api_key.empty()) return;
  std::string_view auth;
  if (auto it = req.find(http::field::authorization); it != req.end()) auth = it->value();
  std::string given;
  if (auth.size() > 7 && (auth.substr(0, 7) == "Bearer " || auth.substr(0, 7) == "bearer "))
    given = std::string(auth.substr(7));
  else if (auto it = req.find("x-api-key");
           it != req.end() && target_path(req.target()) == "/v1/messages")
    given = std::string(it->value());  // Anthropic's SDKs send the key this way
  else if (allow_query)
    given = query_param(req.target(), "api_key");
  if (given.empty())
    throw ApiError(401, "invalid_request_error",
                   "You didn't provide an API key. Send it in the Authorization header: "
                   "'Authorization: Bearer YOUR_KEY'.",
                   {}, "missing_api_key");
  if (!same_secret(given, ctx.opts.api_key))
    throw ApiError(401, "invalid_request_error", "Incorrect API key provided.", {},
                   "invalid_api_key");
}

Response handle_simple(ServerContext& ctx, const Request& req, const std::string& rid) {
  const std::string_view path = target_path(req.target());
  const auto method = req.method();
  // CORS preflight: add_cors_headers adds what an allowed origin may use.
  if (method == http::verb::options)
    return make_response(req, http::status::no_content, "", "text/plain");
  if (const RouteSpec* r = find_route(path)) {
    if (!route_allows(*r, method)) return method_not_allowed(req, *r);
    switch (r->route) {
      case Route::Health:
        return health(ctx, req);
      case Route::Metrics:
        return make_response(req, http::status::ok,
                             render_metrics(ctx.metrics, ctx.http) + ctx.media.render_metrics(),
                             "text/plain; version=0.0.4; charset=utf-8");
      case Route::Models:
        return models(ctx, req);
      case Route::Model:
        return model(ctx, req, path.substr(r->path.size()));
      case Route::StoredResponse:
        return stored_response(ctx, req, path.substr(r->path.size()));
      case Route::Adapters:
        return adapter_list(ctx, req);
      case Route::Adapter:
        return adapter_unload(ctx, req, path.substr(r->path.size()));
      case Route::WebSocket:
        throw ApiError(426, "invalid_request_error",
                       "GET /v1/ws needs a WebSocket upgrade (see web/PROTOCOL.md).", {},
                       "upgrade_required");
      default:
        break;  // the session's own routes never come here
    }
    throw ApiError(500, "server_error", "Route " + std::string(path) + " has no handler.");
  }
  if ((method == http::verb::get || method == http::verb::head) && !path.starts_with("/v1/")) {
    if (auto f = ctx.files.get(path)) {
      Response res = make_response(req, http::status::ok, std::move(f->body), f->content_type);
      res.set(http::field::cache_control, "no-cache");
      return res;
    }
  }
  ctx.log->debug("[{}] no route for {} {}", rid, std::string(req.method_string()),
                 std::string(path));
  return error_response(
      req, ApiError::not_found("Unknown request URL: " + std::string(req.method_string()) + " " +
                               std::string(path) + "."));
}

}  // namespace tern::server
