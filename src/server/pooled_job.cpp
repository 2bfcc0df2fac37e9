#include "pooled_job.h"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <charconv>
#include <cstdlib>

#include "json_fields.h"
#include "routes.h"
#include "session.h"
#include "tern/sched/scheduler.h"
#include "tern/server/openai_bodies.h"
#include "waker.h"

namespace tern::server {
namespace {

using namespace fields;

using namespace net::experimental::awaitable_operators;

// Runs a request's items through the scheduler: at most max_batch of them
// submitted at a time (more would only wait in its queue, and a 2048-input
// request must not fill that queue for everyone), the next one as each
// finishes. All of them share the connection's client name, so admission
// stays fair between this request and other clients.
class PooledJob {
 public:
  PooledJob(ServerContext& ctx, const PooledWork& w, const std::string& rid,
            const std::string& client, Waker& waker)
      : ctx_(ctx),
        w_(w),
        rid_(rid),
        client_(client),
        waker_(waker),
        streams_(w.inputs->size()),
        pooled_(w.inputs->size()) {}

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
      // Items finished and made room: submit the next ones before sleeping
      // (nothing would wake a wait with none of ours in flight).
      if (done_ != done_before && next_ < streams_.size()) continue;
      if (!co_await waker_.wait())
        throw ApiError(500, "server_error", "The request was cancelled.");
    }
  }

  // Cancels every item still running (the client went away, or one failed).
  void cancel() {
    for (const auto& s : streams_)
      if (s && !s->finished()) ctx_.scheduler.cancel(s);
  }

 private:
  // Submits item next_; false when the queue is full (retried as items finish).
  bool submit_next() {
    auto stream = std::make_shared<sched::Stream>(waker_.notifier());
    sched::Request q;
    q.id = rid_ + "/" + std::to_string(next_);
    q.prompt = (*w_.inputs)[next_];
    q.pooling = w_.pooling;
    q.client = client_;
    q.stream = stream;
    sched::SubmitStatus st;
    try {
      st = ctx_.scheduler.submit(std::move(q));
    } catch (const sched::PromptTooLongError& e) {
      throw ApiError::bad_request(e.what(), item_name(w_.item, next_), "context_length_exceeded");
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
          "Pooling " + item_name(w_.item, i) + " failed: " +
              (c.finish->error.empty() ? sched::to_string(c.finish->reason) : c.finish->error));
    pooled_[i] = std::move(c.finish->embedding);
    streams_[i].reset();
    --in_flight_;
    ++done_;
  }

  ServerContext& ctx_;
  const PooledWork& w_;
  const std::string& rid_;
  const std::string& client_;
  Waker& waker_;
  std::vector<std::shared_ptr<sched::Stream>> streams_;  // null: not submitted, or collected
  std::vector<std::vector<float>> pooled_;
  size_t next_ = 0, first_open_ = 0, in_flight_ = 0, done_ = 0;
};

}  // namespace

std::string item_name(const std::string& item, size_t i) {
  return item + "[" + std::to_string(i) + "]";
}

nlohmann::json short_float(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

void cut_tokens(std::vector<int32_t>& ids, size_t max_tokens, bool keep_end) {
  if (max_tokens == 0 || ids.size() <= max_tokens) return;
  if (keep_end)
    ids.erase(ids.begin(), ids.end() - long(max_tokens));
  else
    ids.resize(max_tokens);
}

void read_truncation(const nlohmann::json& body, int max_tokens, int& to, bool& keep_end) {
  to = 0;
  keep_end = false;
  bool cut = false;
  if (get_bool(body, "truncate", cut) && cut) to = max_tokens;
  int64_t k = 0;
  if (get_int(body, "truncate_prompt_tokens", k)) {
    if (k == -1) k = max_tokens;
    if (k < 1 || k > max_tokens)
      bad_value("truncate_prompt_tokens", "expected -1 (the most this server takes) or 1 to " +
                                              std::to_string(max_tokens) + ", got " +
                                              std::to_string(k) + ".");
    if (to > 0) bad_value("truncate_prompt_tokens", "send either it or \"truncate\", not both.");
    to = int(k);
    keep_end = true;
  }
}

awaitable<bool> serve_pooled(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                             const std::string& rid, const std::string& client,
                             const std::string& what, std::function<PooledWork()> parse,
                             std::function<nlohmann::json(std::vector<std::vector<float>>&)> body) {
  auto waker = std::make_shared<Waker>(stream.get_executor());
  std::optional<ApiError> refused;
  PooledWork work;
  try {
    // Off the reactor thread: the JSON and the tokenizer.
    work = co_await net::co_spawn(
        ctx.prep, [&]() -> awaitable<PooledWork> { co_return parse(); }, net::use_awaitable);
  } catch (const std::exception& e) {
    refused = ApiError::from(e);
  }
  std::string answer;
  if (!refused) {
    ctx.log->info("[{}] {} {}={} tokens={} pooling={}", rid, what, work.item, work.inputs->size(),
                  work.prompt_tokens, to_string(work.pooling));
    PooledJob job(ctx, work, rid, client, *waker);
    try {
      auto outcome = co_await (job.run() || watch_peer(stream.socket()));
      if (outcome.index() == 1) {  // the client hung up: free the slots now
        ctx.log->info("[{}] client went away; cancelling", rid);
        job.cancel();
        co_return false;
      }
      answer = dump(body(std::get<0>(outcome)));
    } catch (const std::exception& e) {
      job.cancel();
      refused = ApiError::from(e);
    }
  }
  Response res = refused ? error_response(req, *refused)
                         : json_response(req, http::status::ok, std::move(answer));
  res.set("X-Request-Id", rid);
  add_cors_headers(ctx, req, res);
  co_return co_await write_response(ctx, stream, std::move(res), rid, what);
}

}  // namespace tern::server
