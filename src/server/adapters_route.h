#pragma once
// LoRA adapters over HTTP, behind the API key like the rest of /v1/:
//   GET /v1/adapters            -> {"object": "list", "data": [adapter, ...]}
//   POST /v1/adapters {"name", "path"} -> 201 and the adapter (loaded from a
//                                  file below --lora-dir, validated; 403 when
//                                  no --lora-dir was given)
//   DELETE /v1/adapters/NAME    -> {"id", "object": "adapter", "deleted": true}
// An adapter object: {"id": NAME, "object": "adapter", "model": "<base>:NAME",
// "path", "alpha", "max_rank", "matrices"}. Requests already running with an
// unloaded adapter finish on it. Also the /v1/models entries of the adapters.
#include <nlohmann/json.hpp>
#include <string_view>

#include "context.h"
#include "net.h"

namespace tern::server {

// GET /v1/adapters.
Response adapter_list(ServerContext& ctx, const Request& req);
// DELETE /v1/adapters/NAME (404 adapter_not_found for no such adapter).
Response adapter_unload(ServerContext& ctx, const Request& req, std::string_view name);

// POST /v1/adapters: the file is resolved, read and validated on the prep
// pool, never on the reactor thread. Returns whether the connection may be
// kept alive.
awaitable<bool> handle_adapter_load(ServerContext& ctx, beast::tcp_stream& stream,
                                    const Request& req, const std::string& rid);

// One /v1/models entry per loaded adapter: id "<base>:NAME".
nlohmann::json adapter_model_objects(const ServerContext& ctx, const nlohmann::json& base);

}  // namespace tern::server
