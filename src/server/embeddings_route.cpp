#include "embeddings_route.h"

#include <cstring>

#include "json_fields.h"
#include "pooled_job.h"
#include "tern/engine/engine.h"
#include "tern/model/pooling.h"
#include "tern/sched/scheduler.h"
#include "tern/server/openai_bodies.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;

constexpr const char* kInputTypes =
    "a string, an array of strings, an array of token ids or an array of arrays of token ids";

std::string item_name(size_t i) {
  return server::item_name("input", i);
}

// An array of token ids (`where` names it in errors), each in the vocabulary.
std::vector<int32_t> token_ids(const json& a, const std::string& where, int n_vocab) {
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  for (const json& t : a) {
    if (!t.is_number_integer()) wrong_type(where, "an array of token ids", t);
    const int64_t id = t.is_number_unsigned() && t.get<uint64_t>() > uint64_t(INT64_MAX)
                           ? INT64_MAX
                           : t.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      bad_value(where, "token id " + std::to_string(id) + " is outside the vocabulary (0 to " +
                           std::to_string(n_vocab - 1) + ").");
    ids.push_back(int32_t(id));
  }
  return ids;
}

// The inputs as token ids, each checked against the limits.
std::vector<std::vector<int32_t>> read_inputs(const json& in, const Tokenizer& tok,
                                              const EmbeddingLimits& lim,
                                              const EmbeddingsRequest& r) {
  std::vector<std::vector<int32_t>> out;
  auto text = [&](const json& s, const std::string& where) {
    if (s.get_ref<const std::string&>().empty())
      bad_value(where, "an empty string has nothing to embed.");
    out.push_back(tok.encode(s.get<std::string>(), /*add_bos=*/true, /*parse_special=*/true));
  };
  if (in.is_string()) {
    text(in, "input");
  } else if (!in.is_array()) {
    wrong_type("input", kInputTypes, in);
  } else if (in.empty()) {
    bad_value("input", "the list of inputs is empty.");
  } else if (in.size() > kMaxEmbeddingInputs) {
    bad_value("input", "at most " + std::to_string(kMaxEmbeddingInputs) +
                           " inputs per request, but got " + std::to_string(in.size()) + ".");
  } else if (in[0].is_number()) {  // one input as token ids
    out.push_back(token_ids(in, "input", tok.n_vocab()));
  } else if (in[0].is_string()) {
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].is_string()) wrong_type(item_name(i), "a string, as input[0] is", in[i]);
      text(in[i], item_name(i));
    }
  } else if (in[0].is_array()) {
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].is_array())
        wrong_type(item_name(i), "an array of token ids, as input[0] is", in[i]);
      if (in[i].empty()) bad_value(item_name(i), "an empty array has nothing to embed.");
      out.push_back(token_ids(in[i], item_name(i), tok.n_vocab()));
    }
  } else {
    wrong_type("input[0]", "a string, a token id or an array of token ids", in[0]);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string where = in.is_array() && !in[0].is_number() ? item_name(i) : "input";
    if (out[i].empty()) bad_value(where, "it has no tokens to embed.");
    if (r.truncate_to > 0) cut_tokens(out[i], size_t(r.truncate_to), r.keep_end);
    if (int64_t(out[i].size()) > lim.max_tokens)
      throw ApiError::bad_request(
          "Invalid '" + where + "': it is " + std::to_string(out[i].size()) +
              " tokens long, but this model's maximum context length is " +
              std::to_string(lim.n_ctx) + " tokens (at most " + std::to_string(lim.max_tokens) +
              " per input). Please reduce the length of the input, or send \"truncate\": true "
              "to cut it.",
          where, "context_length_exceeded");
  }
  return out;
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const json& body, const Tokenizer& tok,
                                           const EmbeddingLimits& lim, UnknownFields unknown) {
  if (!body.is_object()) wrong_type("body", "a JSON object", body);
  check_fields(body, "",
               {"input", "model", "encoding_format", "dimensions", "user", "truncate",
                "truncate_prompt_tokens"},
               unknown);
  EmbeddingsRequest r;
  get_string(body, "model", r.model);
  std::string user;
  get_string(body, "user", user);
  std::string format = "float";
  get_string(body, "encoding_format", format);
  if (format != "float" && format != "base64")
    bad_value("encoding_format",
              "expected 'float' or 'base64', got " + fields::quoted(format) + ".");
  r.base64 = format == "base64";
  int64_t dims = 0;
  if (get_int(body, "dimensions", dims)) {
    if (dims < 1 || dims > lim.n_embd)
      bad_value("dimensions", "this model's embeddings have " + std::to_string(lim.n_embd) +
                                  " dimensions: ask for 1 to " + std::to_string(lim.n_embd) +
                                  ", not " + std::to_string(dims) + ".");
    r.dimensions = int(dims);
  }
  read_truncation(body, lim.max_tokens, r.truncate_to, r.keep_end);
  const json* in = field(body, "input");
  if (!in) missing("input");
  r.inputs = read_inputs(*in, tok, lim, r);
  for (const auto& ids : r.inputs) r.prompt_tokens += int64_t(ids.size());
  return r;
}

std::string base64_floats(std::span<const float> v) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + size_t(b)] = (u >> (8 * b)) & 0xff;  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = uint32_t(bytes[i]) << 16;
    if (n > 1) w |= uint32_t(bytes[i + 1]) << 8;
    if (n > 2) w |= uint32_t(bytes[i + 2]);
    out += kAlphabet[(w >> 18) & 63];
    out += kAlphabet[(w >> 12) & 63];
    out += n > 1 ? kAlphabet[(w >> 6) & 63] : '=';
    out += n > 2 ? kAlphabet[w & 63] : '=';
  }
  return out;
}

json embeddings_body(const EmbeddingsRequest& r, std::span<const std::vector<float>> pooled,
                     const std::string& model_id) {
  json data = json::array();
  for (size_t i = 0; i < pooled.size(); ++i) {
    const std::vector<float> v = finish_embedding(pooled[i], r.dimensions, /*normalize=*/true);
    json e;
    if (r.base64) {
      e = base64_floats(v);
    } else {
      e = json::array();
      for (float f : v) e.push_back(short_float(f));
    }
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(e)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", r.model.empty() ? model_id : r.model},
          {"usage", {{"prompt_tokens", r.prompt_tokens}, {"total_tokens", r.prompt_tokens}}}};
}

awaitable<bool> handle_embeddings(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                                  const std::string& rid, const std::string& client) {
  EmbeddingsRequest er;
  auto parse = [&] {
    if (ctx.opts.pooling == Pooling::Rank)
      throw ApiError::bad_request(
          "This model is a reranker (pooling rank): score documents with POST /v1/rerank, or "
          "start the server with --pooling mean, cls or last to embed with it.",
          {}, "model_not_supported");
    const EmbeddingLimits lim{ctx.scheduler.max_prompt_tokens(), ctx.scheduler.n_ctx(),
                              ctx.engine.config().d_model};
    er = parse_embeddings_request(parse_json_body(req.body()), ctx.engine.tokenizer(), lim,
                                  ctx.unknown_fields());
    return PooledWork{&er.inputs, ctx.opts.pooling, "input", er.prompt_tokens};
  };
  auto body = [&](std::vector<std::vector<float>>& pooled) {
    return embeddings_body(er, pooled, ctx.model_id);
  };
  co_return co_await serve_pooled(ctx, stream, req, rid, client, "POST /v1/embeddings", parse,
                                  body);
}

}  // namespace tern::server
