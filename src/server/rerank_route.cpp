#include "rerank_route.h"

#include <algorithm>
#include <numeric>

#include "json_fields.h"
#include "pooled_job.h"
#include "routes.h"
#include "tern/engine/engine.h"
#include "tern/model/model.h"
#include "tern/model/rank_head.h"
#include "tern/sched/scheduler.h"
#include "tern/server/openai_bodies.h"
#include "tern/tokenizer/rerank_prompt.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;

// The documents' texts: strings, or objects whose "text" is one.
std::vector<std::string> read_documents(const json& docs, const char* key) {
  if (!docs.is_array()) wrong_type(key, "an array of strings or of {\"text\": ...} objects", docs);
  if (docs.empty()) bad_value(key, "the list of documents is empty.");
  if (docs.size() > kMaxRerankDocuments)
    bad_value(key, "at most " + std::to_string(kMaxRerankDocuments) +
                       " documents per request, but got " + std::to_string(docs.size()) + ".");
  std::vector<std::string> out;
  out.reserve(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    const json& d = docs[i];
    const std::string where = item_name(key, i);
    if (d.is_string()) {
      out.push_back(d.get<std::string>());
    } else if (d.is_object()) {
      const json* t = field(d, "text");
      if (!t) missing(where + ".text");
      if (!t->is_string()) wrong_type(where + ".text", "a string", *t);
      out.push_back(t->get<std::string>());
    } else {
      wrong_type(where, "a string or an object {\"text\": ...}", d);
    }
  }
  return out;
}

}  // namespace

RerankRequest parse_rerank_request(const json& body, const Tokenizer& tok,
                                   const RerankPrompt& prompt, const RerankLimits& lim,
                                   UnknownFields unknown) {
  if (!body.is_object()) wrong_type("body", "a JSON object", body);
  check_fields(body, "",
               {"query", "documents", "texts", "top_n", "return_documents", "return_text", "model",
                "user", "truncate", "truncate_prompt_tokens"},
               unknown);
  RerankRequest r;
  get_string(body, "model", r.model);
  std::string query;
  if (!get_string(body, "query", query)) missing("query");
  if (query.empty()) bad_value("query", "an empty query has nothing to rank against.");
  const char* key = field(body, "documents") ? "documents" : "texts";
  const json* docs = field(body, key);
  if (!docs) missing("documents");
  r.tei = std::string_view(key) == "texts";
  get_bool(body, r.tei ? "return_text" : "return_documents", r.return_documents);
  r.documents = read_documents(*docs, key);
  r.top_n = r.documents.size();
  int64_t top_n = 0;
  if (get_int(body, "top_n", top_n)) {
    if (top_n < 1) bad_value("top_n", "expected at least 1, got " + std::to_string(top_n) + ".");
    r.top_n = std::min(r.top_n, size_t(top_n));
  }
  int cut_to = 0;
  bool keep_end = false;  // a document's end is cut whichever field asked
  read_truncation(body, lim.max_tokens, cut_to, keep_end);
  const int max = cut_to > 0 ? cut_to : lim.max_tokens;
  for (size_t i = 0; i < r.documents.size(); ++i) {
    bool cut = false;
    r.prompts.push_back(prompt.encode(tok, query, r.documents[i], max, cut_to > 0, &cut));
    const std::string doc = item_name(key, i);
    const std::string where = cut && r.prompts.back().size() > size_t(max) ? "query" : doc;
    if (r.prompts.back().size() > size_t(max))
      throw ApiError::bad_request(
          "Invalid '" + where + "': the query and " + doc + " make a prompt of " +
              std::to_string(r.prompts.back().size()) +
              " tokens, but this model's maximum context length is " + std::to_string(lim.n_ctx) +
              " tokens (at most " + std::to_string(max) +
              " per prompt). Please shorten it, or send \"truncate\": true to cut documents.",
          where, "context_length_exceeded");
    r.prompt_tokens += int64_t(r.prompts.back().size());
  }
  return r;
}

json rerank_body(const RerankRequest& r, std::span<const float> scores,
                 const std::string& model_id) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  order.resize(std::min(order.size(), r.top_n));
  json results = json::array();
  for (size_t i : order) {
    json e{{"index", i}, {r.tei ? "score" : "relevance_score", short_float(scores[i])}};
    if (r.return_documents) {
      if (r.tei)
        e["text"] = r.documents[i];
      else
        e["document"] = {{"text", r.documents[i]}};
    }
    results.push_back(std::move(e));
  }
  if (r.tei) return results;
  return {{"model", r.model.empty() ? model_id : r.model},
          {"object", "list"},
          {"usage", {{"prompt_tokens", r.prompt_tokens}, {"total_tokens", r.prompt_tokens}}},
          {"results", std::move(results)}};
}

awaitable<bool> handle_rerank(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                              const std::string& rid, const std::string& client) {
  RerankRequest rr;
  auto parse = [&] {
    if (!ctx.engine.rank_head())
      throw ApiError::bad_request(
          "The model '" + ctx.model_id +
              "' cannot rerank: it has no classification head (cls.output.weight). Serve a "
              "reranker (such as Qwen3-Reranker or bge-reranker) for /v1/rerank.",
          "model", "model_not_supported");
    const RerankLimits lim{ctx.scheduler.max_prompt_tokens(), ctx.scheduler.n_ctx()};
    const RerankPrompt prompt =
        RerankPrompt::from_gguf(ctx.engine.model().file(), ctx.engine.tokenizer());
    rr = parse_rerank_request(parse_json_body(req.body()), ctx.engine.tokenizer(), prompt, lim,
                              ctx.unknown_fields());
    return PooledWork{&rr.prompts, Pooling::Rank, rr.tei ? "texts" : "documents", rr.prompt_tokens};
  };
  auto body = [&](std::vector<std::vector<float>>& outputs) {
    std::vector<float> scores;
    for (const auto& o : outputs) scores.push_back(o.at(0));
    return rerank_body(rr, scores, ctx.model_id);
  };
  co_return co_await serve_pooled(ctx, stream, req, rid, client,
                                  "POST " + std::string(target_path(req.target())), parse, body);
}

}  // namespace tern::server
