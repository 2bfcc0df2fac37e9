#include "tokenize_route.h"

#include "generation.h"
#include "json_fields.h"
#include "routes.h"
#include "session.h"
#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "tern/server/openai_bodies.h"
#include "tern/server/openai_request.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"
#include "tern/tokenizer/unicode.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;

json piece_json(const std::string& piece) {
  if (unicode::is_valid_utf8(piece)) return piece;
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(int(c));
  return bytes;
}

// Chat messages (with tools and chat_template_kwargs) as
// /v1/chat/completions parses and tokenizes them.
std::vector<int32_t> chat_ids(const Tokenizer& tok, const ChatTemplate& tmpl, const json& body,
                              UnknownFields unknown) {
  bool add_generation_prompt = true;
  get_bool(body, "add_generation_prompt", add_generation_prompt);
  json chat = json::object();
  for (const char* k :
       {"messages", "tools", "tool_choice", "chat_template_kwargs", "reasoning_effort"})
    if (body.contains(k)) chat[k] = body.at(k);
  const GenerationRequest g = parse_chat_request(chat, {}, unknown);
  return tok.encode(chat_segments(tmpl, g, add_generation_prompt), /*add_bos=*/true);
}

}  // namespace

json tokenize_body(const Tokenizer& tok, const ChatTemplate& tmpl, const json& body, int n_ctx,
                   UnknownFields unknown) {
  check_fields(body, "",
               {"content", "prompt", "messages", "add_generation_prompt", "add_special",
                "add_special_tokens", "parse_special", "with_pieces", "model"},
               unknown);
  bool with_pieces = false;
  get_bool(body, "with_pieces", with_pieces);
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    ids = chat_ids(tok, tmpl, body, unknown);
  } else {
    std::string text;
    // llama.cpp sends `content` and adds no special tokens by default; vLLM
    // sends `prompt` and adds them by default.
    const bool vllm = !get_string(body, "content", text);
    if (vllm && !get_string(body, "prompt", text)) missing("content");
    bool add_special = vllm;
    get_bool(body, "add_special", add_special);
    get_bool(body, "add_special_tokens", add_special);
    bool parse_special = true;
    get_bool(body, "parse_special", parse_special);
    ids = tok.encode(text, add_special, parse_special);
  }
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces)
      tokens.push_back({{"id", id}, {"piece", piece_json(tok.token_to_piece(id, true))}});
    else
      tokens.push_back(id);
  }
  return json{{"tokens", std::move(tokens)}, {"count", ids.size()}, {"max_model_len", n_ctx}};
}

json detokenize_body(const Tokenizer& tok, const json& body, UnknownFields unknown) {
  check_fields(body, "", {"tokens", "model"}, unknown);
  const json* v = field(body, "tokens");
  if (!v) missing("tokens");
  if (!v->is_array()) wrong_type("tokens", "an array of token ids", *v);
  std::vector<int32_t> ids;
  ids.reserve(v->size());
  for (const auto& t : *v) {
    if (!t.is_number_integer()) wrong_type("tokens", "an array of token ids", t);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= tok.n_vocab())
      bad_value("tokens", "token id " + std::to_string(id) + " is outside the vocabulary.");
    ids.push_back(int32_t(id));
  }
  return json{{"content", tok.decode(ids, /*render_special=*/true)}};
}

awaitable<bool> handle_tokenize(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                                const std::string& rid) {
  const std::string_view path = target_path(req.target());
  const bool detok = path == "/detokenize";
  Response res = co_await net::co_spawn(
      ctx.prep,
      [&]() -> awaitable<Response> {
        try {
          const json body = parse_json_body(req.body());
          const Tokenizer& tok = ctx.engine.tokenizer();
          const json out = detok ? detokenize_body(tok, body, ctx.unknown_fields())
                                 : tokenize_body(tok, ctx.engine.chat_template(), body,
                                                 ctx.scheduler.n_ctx(), ctx.unknown_fields());
          co_return json_response(req, http::status::ok, dump(out));
        } catch (const std::exception& e) {
          co_return error_response(req, ApiError::from(e));
        }
      },
      net::use_awaitable);
  add_cors_headers(ctx, req, res);
  co_return co_await write_response(ctx, stream, std::move(res), rid, "POST " + std::string(path));
}

}  // namespace tern::server
