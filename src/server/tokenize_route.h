#pragma once
// POST /tokenize and POST /detokenize (llama.cpp's shapes; vLLM's `prompt` is
// accepted too), behind the API key like /v1/*. The tokenizer runs on the
// prep pool, never on the reactor.
#include <nlohmann/json.hpp>
#include <string>

#include "context.h"
#include "net.h"

namespace tern {
class Tokenizer;
class ChatTemplate;
}  // namespace tern

namespace tern::server {

// {"content" | "prompt": str, "add_special" | "add_special_tokens": bool,
//  "parse_special": bool (default true), "with_pieces": bool}
//   -> {"tokens": [id, ...]} or, with_pieces, {"tokens": [{"id", "piece"}, ...]}
// (a piece that is not valid UTF-8 on its own is an array of its bytes).
// Or chat {"messages": [...], "add_generation_prompt": bool (default true)}:
// the ids /v1/chat/completions would run (the model's template applied,
// message content tokenized as text).
nlohmann::json tokenize_body(const Tokenizer& tok, const ChatTemplate& tmpl,
                             const nlohmann::json& body, int n_ctx, UnknownFields unknown);

// {"tokens": [id, ...]} -> {"content": str}; control tokens are rendered.
nlohmann::json detokenize_body(const Tokenizer& tok, const nlohmann::json& body,
                               UnknownFields unknown);

// The route: parses, answers, writes. Returns whether to keep the connection.
awaitable<bool> handle_tokenize(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                                const std::string& rid);

}  // namespace tern::server
