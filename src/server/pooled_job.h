#pragma once
// What /v1/embeddings and /v1/rerank share: a request's inputs (token ids)
// run as prefill-only sequences of the scheduler's batched steps
// (sched::Request::pooling), their pooled vectors (or rank scores) back in
// input order, and the route's shell around that: parse off the reactor
// thread, run while watching for the client hanging up, answer.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "context.h"
#include "net.h"
#include "tern/model/pooling.h"

namespace tern::server {

// A parsed request's work.
struct PooledWork {
  const std::vector<std::vector<int32_t>>* inputs = nullptr;  // token ids, one list per item
  Pooling pooling = Pooling::Mean;
  std::string item;  // what errors call an item: "input" -> "input[3]"
  int64_t prompt_tokens = 0;
};

// The item's name in errors: "input[3]".
std::string item_name(const std::string& item, size_t i);

// A float as JSON: the shortest decimal that reads back as that float (a
// double conversion would print 0.1f as 0.10000000149011612).
nlohmann::json short_float(float f);

// Cuts ids to max_tokens (> 0) keeping the start (keep_end: the end, as
// vLLM's truncate_prompt_tokens does).
void cut_tokens(std::vector<int32_t>& ids, size_t max_tokens, bool keep_end);

// Reads "truncate" (bool, Hugging Face TEI's: cut to max_tokens keeping the
// start) and "truncate_prompt_tokens" (int, vLLM's: keep the last k; -1 =
// max_tokens) of body: to (0: no cut) and keep_end. Throws ApiError 400
// naming the field.
void read_truncation(const nlohmann::json& body, int max_tokens, int& to, bool& keep_end);

// The route: `parse` (run on ctx.prep; it may fill the caller's request
// object and throws ApiError on bad input) gives the work; its items run
// through the scheduler (at most max_batch at a time); `body` turns the
// pooled vectors, in input order, into the 200 response. Returns whether to
// keep the connection.
awaitable<bool> serve_pooled(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                             const std::string& rid, const std::string& client,
                             const std::string& what, std::function<PooledWork()> parse,
                             std::function<nlohmann::json(std::vector<std::vector<float>>&)> body);

}  // namespace tern::server
