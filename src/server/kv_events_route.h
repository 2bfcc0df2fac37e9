#pragma once
// GET /v1/kv/events: the prefix cache's block stored / removed events for
// prefix-aware routers (PROTOCOL.md), behind the API key like /v1/*.
// Server-sent events, one batch of events per message, sent at most every
// 200 ms; ?since=SEQ resumes after an event number (default 0: everything
// the server still holds); ?stream=false answers one JSON batch instead.
#include <string>

#include "context.h"
#include "net.h"

namespace tern::server {

awaitable<bool> handle_kv_events(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                                 const std::string& rid);

}  // namespace tern::server
