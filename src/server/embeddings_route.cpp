#include "embeddings_route.h"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "json_fields.h"
#include "routes.h"
#include "session.h"
#include "tern/engine/engine.h"
#include "tern/model/pooling.h"
#include "tern/sched/scheduler.h"
#include "tern/server/openai_bodies.h"
#include "tern/tokenizer/tokenizer.h"
#include "waker.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;
using namespace net::experimental::awaitable_operators;

constexpr const char* kInputTypes =
    "a string, an array of strings, an array of token ids or an array of arrays of token ids";

std::string item_name(size_t i) {
  return "input[" + std::to_string(i) + "]";
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
                                              const EmbeddingLimits& lim) {
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
    if (int64_t(out[i].size()) > lim.max_tokens)
      throw ApiError::bad_request(
          "Invalid '" + where + "': it is " + std::to_string(out[i].size()) +
              " tokens long, but this model's maximum context length is " +
              std::to_string(lim.n_ctx) + " tokens (at most " + std::to_string(lim.max_tokens) +
              " per input). Please reduce the length of the input.",
          where, "context_length_exceeded");
  }
  return out;
}

// A float as JSON: the shortest decimal that reads back as that float (a
// double conversion would print 0.1f as 0.10000000149011612).
json short_float(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const json& body, const Tokenizer& tok,
                                           const EmbeddingLimits& lim, UnknownFields unknown) {
  if (!body.is_object()) wrong_type("body", "a JSON object", body);
  check_fields(body, "", {"input", "model", "encoding_format", "dimensions", "user"}, unknown);
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
  const json* in = field(body, "input");
  if (!in) missing("input");
  r.inputs = read_inputs(*in, tok, lim);
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

namespace {

// Runs a request's inputs through the scheduler: at most max_batch of them
// submitted at a time (more would only wait in its queue, and a 2048-input
// request must not fill that queue for everyone), the next one as each
// finishes. All of them share the connection's client name, so admission
// stays fair between this request and other clients.
class EmbeddingJob {
 public:
  EmbeddingJob(ServerContext& ctx, const EmbeddingsRequest& r, const std::string& rid,
               const std::string& client, Waker& waker)
      : ctx_(ctx),
        r_(r),
        rid_(rid),
        client_(client),
        waker_(waker),
        streams_(r.inputs.size()),
        pooled_(r.inputs.size()) {}

  // The pooled vectors, in input order; throws ApiError on a refusal or a failure.
  awaitable<std::vector<std::vector<float>>> run() {
    const size_t window = size_t(std::max(1, ctx_.scheduler.options().max_batch));
    for (;;) {
      const size_t done_before = done_;
      while (next_ < streams_.size() && in_flight_ < window && submit_next()) {
      }
      for (size_t i = first_open_; i < next_; ++i) collect(i);
      while (first_open_ < next_ && !streams_[first_open_]) ++first_open_;
      if (done_ == streams_.size()) co_return std::move(pooled_);
      // Inputs finished and made room: submit the next ones before sleeping
      // (nothing would wake a wait with none of ours in flight).
      if (done_ != done_before && next_ < streams_.size()) continue;
      if (!co_await waker_.wait())
        throw ApiError(500, "server_error", "The request was cancelled.");
    }
  }

  // Cancels every input still running (the client went away, or one failed).
  void cancel() {
    for (const auto& s : streams_)
      if (s && !s->finished()) ctx_.scheduler.cancel(s);
  }

 private:
  // Submits input next_; false when the queue is full (retried as inputs finish).
  bool submit_next() {
    auto stream = std::make_shared<sched::Stream>(waker_.notifier());
    sched::Request q;
    q.id = rid_ + "/" + std::to_string(next_);
    q.prompt = r_.inputs[next_];
    q.pooling = ctx_.opts.pooling;
    q.client = client_;
    q.stream = stream;
    sched::SubmitStatus st;
    try {
      st = ctx_.scheduler.submit(std::move(q));
    } catch (const sched::PromptTooLongError& e) {
      throw ApiError::bad_request(e.what(), item_name(next_), "context_length_exceeded");
    }
    if (st == sched::SubmitStatus::ShuttingDown)
      throw ApiError(503, "server_error", "The server is shutting down.", {}, "shutting_down");
    if (st == sched::SubmitStatus::QueueFull) {
      if (in_flight_ > 0) return false;  // ours will make room
      throw ApiError(429, "rate_limit_exceeded",
                     "The server is busy (its request queue is full); retry shortly.", {},
                     "queue_full");
    }
    streams_[next_++] = std::move(stream);
    ++in_flight_;
    return true;
  }

  void collect(size_t i) {
    if (!streams_[i]) return;
    sched::StreamChunk c = streams_[i]->drain();
    if (!c.finish) return;
    if (c.finish->reason != sched::FinishReason::Stop || c.finish->embedding.empty())
      throw ApiError(
          500, "server_error",
          "Embedding " + item_name(i) + " failed: " +
              (c.finish->error.empty() ? sched::to_string(c.finish->reason) : c.finish->error));
    pooled_[i] = std::move(c.finish->embedding);
    streams_[i].reset();
    --in_flight_;
    ++done_;
  }

  ServerContext& ctx_;
  const EmbeddingsRequest& r_;
  const std::string& rid_;
  const std::string& client_;
  Waker& waker_;
  std::vector<std::shared_ptr<sched::Stream>> streams_;  // null: not submitted, or collected
  std::vector<std::vector<float>> pooled_;
  size_t next_ = 0, first_open_ = 0, in_flight_ = 0, done_ = 0;
};

}  // namespace

awaitable<bool> handle_embeddings(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                                  const std::string& rid, const std::string& client) {
  const std::string what = "POST /v1/embeddings";
  auto waker = std::make_shared<Waker>(stream.get_executor());
  std::optional<ApiError> refused;
  EmbeddingsRequest er;
  try {
    // Off the reactor thread: the JSON and the tokenizer.
    er = co_await net::co_spawn(
        ctx.prep,
        [&]() -> awaitable<EmbeddingsRequest> {
          const EmbeddingLimits lim{ctx.scheduler.max_prompt_tokens(), ctx.scheduler.n_ctx(),
                                    ctx.engine.config().d_model};
          co_return parse_embeddings_request(parse_json_body(req.body()), ctx.engine.tokenizer(),
                                             lim, ctx.unknown_fields());
        },
        net::use_awaitable);
  } catch (const std::exception& e) {
    refused = ApiError::from(e);
  }
  std::vector<std::vector<float>> pooled;
  if (!refused) {
    ctx.log->info("[{}] {} inputs={} tokens={} pooling={}", rid, what, er.inputs.size(),
                  er.prompt_tokens, to_string(ctx.opts.pooling));
    EmbeddingJob job(ctx, er, rid, client, *waker);
    try {
      auto outcome = co_await (job.run() || watch_peer(stream.socket()));
      if (outcome.index() == 1) {  // the client hung up: free the slots now
        ctx.log->info("[{}] client went away; cancelling", rid);
        job.cancel();
        co_return false;
      }
      pooled = std::move(std::get<0>(outcome));
    } catch (const std::exception& e) {
      job.cancel();
      refused = ApiError::from(e);
    }
  }
  Response res = refused ? error_response(req, *refused)
                         : json_response(req, http::status::ok,
                                         dump(embeddings_body(er, pooled, ctx.model_id)));
  res.set("X-Request-Id", rid);
  add_cors_headers(ctx, req, res);
  co_return co_await write_response(ctx, stream, std::move(res), rid, what);
}

}  // namespace tern::server
