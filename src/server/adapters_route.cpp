#include "adapters_route.h"

#include "json_fields.h"
#include "routes.h"
#include "tern/core/error.h"
#include "tern/engine/engine.h"
#include "tern/server/openai_request.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using fields::check_fields;
using fields::get_string;

json adapter_object(const ServerContext& ctx, const std::string& name, const LoraAdapter& a) {
  return {{"id", name},
          {"object", "adapter"},
          {"model", ctx.model_id + ":" + name},
          {"path", a.path()},
          {"alpha", a.alpha()},
          {"max_rank", a.max_rank()},
          {"matrices", a.n_matrices()}};
}

Response load(ServerContext& ctx, const Request& req) {
  const json body = parse_json_body(req.body());
  check_fields(body, "", {"name", "path"}, UnknownFields::Refuse);
  std::string name, path;
  if (!get_string(body, "name", name) || !get_string(body, "path", path)) {
    throw ApiError::bad_request("'name' and 'path' are required.", "name", "invalid_value");
  }
  std::shared_ptr<const LoraAdapter> a;
  try {
    a = ctx.engine.adapters().load(name, path, ctx.engine.config());
  } catch (const InvalidArgument& e) {
    throw ApiError::bad_request(e.what(), "name", "invalid_value");
  } catch (const Error& e) {  // the file: unreadable, not an adapter, wrong shapes
    throw ApiError::bad_request(e.what(), "path", "invalid_adapter");
  }
  ctx.log->info("adapter '{}' loaded from {}", name, path);
  return json_response(req, http::status::created, adapter_object(ctx, name, *a).dump());
}

}  // namespace

json adapter_model_objects(const ServerContext& ctx, const json& base) {
  json out = json::array();
  for (const auto& [name, a] : ctx.engine.adapters().list()) {
    json m = base;
    m["id"] = ctx.model_id + ":" + name;
    m["parent"] = ctx.model_id;
    m["meta"]["lora"] = adapter_object(ctx, name, *a);
    out.push_back(std::move(m));
  }
  return out;
}

std::optional<Response> handle_adapters(ServerContext& ctx, const Request& req,
                                        std::string_view path) {
  const std::string_view root = "/v1/adapters";
  if (path != root && !path.starts_with("/v1/adapters/")) return std::nullopt;
  const auto method = req.method();
  if (path == root && method == http::verb::get) {
    json data = json::array();
    for (const auto& [name, a] : ctx.engine.adapters().list()) {
      data.push_back(adapter_object(ctx, name, *a));
    }
    return json_response(req, http::status::ok, json{{"object", "list"}, {"data", data}}.dump());
  }
  if (path == root && method == http::verb::post) return load(ctx, req);
  const std::string name(path.substr(root.size() + 1));
  if (path != root && method == http::verb::delete_) {
    if (!ctx.engine.adapters().remove(name)) {
      throw ApiError(404, "invalid_request_error", "No adapter named '" + name + "' is loaded.",
                     "name", "adapter_not_found");
    }
    ctx.log->info("adapter '{}' unloaded", name);
    return json_response(req, http::status::ok,
                         json{{"id", name}, {"object", "adapter"}, {"deleted", true}}.dump());
  }
  Response res = error_response(
      req, ApiError(405, "invalid_request_error",
                    "Use GET or POST on /v1/adapters and DELETE on /v1/adapters/NAME.", {},
                    "method_not_allowed"));
  res.set(http::field::allow, path == root ? "GET, POST" : "DELETE");
  return res;
}

}  // namespace tern::server
