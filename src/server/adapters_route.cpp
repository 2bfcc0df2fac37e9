#include "adapters_route.h"

#include "json_fields.h"
#include "routes.h"
#include "session.h"
#include "tern/core/confined_path.h"
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

// The file `given` names, confined to --lora-dir. Throws ApiError.
std::string adapter_file(const ServerContext& ctx, const std::string& given) {
  if (ctx.opts.lora_dir.empty()) {
    throw ApiError(403, "invalid_request_error",
                   "Loading adapters over HTTP is off: start tern serve with --lora-dir DIR to "
                   "allow adapter files under DIR (or load them at start with --lora NAME=FILE).",
                   "path", "adapter_loading_disabled");
  }
  try {
    return resolve_confined_path(ctx.opts.lora_dir, given);
  } catch (const ConfinedPathError& e) {
    const bool outside = e.why() == PathRefusal::Outside || e.why() == PathRefusal::OutsideByLink;
    if (outside) {
      throw ApiError(403, "invalid_request_error",
                     std::string("Forbidden adapter path: ") + e.what() + " (--lora-dir).", "path",
                     "adapter_path_forbidden");
    }
    throw ApiError::bad_request(std::string("Invalid adapter path: ") + e.what() + ".", "path",
                                "invalid_adapter");
  }
}

Response load(ServerContext& ctx, const Request& req) {
  const json body = parse_json_body(req.body());
  check_fields(body, "", {"name", "path"}, UnknownFields::Refuse);
  std::string name, path;
  if (!get_string(body, "name", name) || !get_string(body, "path", path)) {
    throw ApiError::bad_request("'name' and 'path' are required.", "name", "invalid_value");
  }
  try {
    LoraRegistry::check_name(name);
  } catch (const InvalidArgument& e) {
    throw ApiError::bad_request(e.what(), "name", "invalid_value");
  }
  const std::string file = adapter_file(ctx, path);
  std::shared_ptr<const LoraAdapter> a;
  try {
    a = ctx.engine.adapters().load(name, file, ctx.engine.config());
  } catch (const InvalidArgument& e) {
    throw ApiError::bad_request(e.what(), "name", "invalid_value");
  } catch (const Error& e) {  // the file: unreadable, not an adapter, wrong shapes
    // Messages name the file as the client did, not by its real path.
    std::string what = e.what();
    if (what.starts_with(file)) what.replace(0, file.size(), path);
    throw ApiError::bad_request(what, "path", "invalid_adapter");
  }
  ctx.log->info("adapter '{}' loaded from {}", name, file);
  return json_response(req, http::status::created, adapter_object(ctx, name, *a).dump());
}

}  // namespace

awaitable<bool> handle_adapter_load(ServerContext& ctx, beast::tcp_stream& stream,
                                    const Request& req, const std::string& rid) {
  Response res = co_await net::co_spawn(
      ctx.prep,
      [&]() -> awaitable<Response> {
        try {
          co_return load(ctx, req);
        } catch (const std::exception& e) {
          co_return error_response(req, ApiError::from(e));
        }
      },
      net::use_awaitable);
  add_cors_headers(ctx, req, res);
  co_return co_await write_response(ctx, stream, std::move(res), rid, "POST /v1/adapters");
}

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

Response adapter_list(ServerContext& ctx, const Request& req) {
  json data = json::array();
  for (const auto& [name, a] : ctx.engine.adapters().list()) {
    data.push_back(adapter_object(ctx, name, *a));
  }
  return json_response(req, http::status::ok, json{{"object", "list"}, {"data", data}}.dump());
}

Response adapter_unload(ServerContext& ctx, const Request& req, std::string_view name_in_path) {
  const std::string name(name_in_path);
  if (!ctx.engine.adapters().remove(name)) {
    throw ApiError(404, "invalid_request_error", "No adapter named '" + name + "' is loaded.",
                   "name", "adapter_not_found");
  }
  ctx.log->info("adapter '{}' unloaded", name);
  return json_response(req, http::status::ok,
                       json{{"id", name}, {"object", "adapter"}, {"deleted", true}}.dump());
}

}  // namespace tern::server
