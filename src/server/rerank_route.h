#pragma once
// POST /v1/rerank (also /rerank, /v2/rerank, /v1/reranking, /reranking):
// scores documents against a query with a reranker (a model with a
// classification head, model/rank_head.h). Each document's prompt
// (tokenizer/rerank_prompt.h) is a prefill-only sequence of the scheduler's
// batched steps with rank pooling; its score is the head's first output.
//
//   {"query": str, "documents": [str | {"text": str}, ...], "top_n": int,
//    "return_documents": bool, "model": str, "truncate": bool,
//    "truncate_prompt_tokens": int}
//   -> {"model": ..., "object": "list", "usage": {"prompt_tokens", "total_tokens"},
//       "results": [{"index": i, "relevance_score": f, "document": {"text": ...}}, ...]}
//
// The shape of llama.cpp's server (Jina's and Cohere's clients read it):
// results sorted by score, best first (ties in document order), the first
// top_n of them; "document" only when return_documents. As llama.cpp does,
// {"texts": [...]} instead of "documents" asks for Hugging Face TEI's shape:
// a bare array of {"index", "score", "text" when return_text}.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "context.h"
#include "net.h"

namespace tern {
class Tokenizer;
class RerankPrompt;
}  // namespace tern

namespace tern::server {

// Documents one request may carry (Cohere's limit).
inline constexpr size_t kMaxRerankDocuments = 1000;

struct RerankRequest {
  std::string model;  // as the client named it ("" when absent)
  std::vector<std::string> documents;
  std::vector<std::vector<int32_t>> prompts;  // token ids, one per document
  size_t top_n = 0;                           // results returned (all by default)
  bool return_documents = false;
  bool tei = false;  // "texts" given: TEI's response shape
  int64_t prompt_tokens = 0;
};

struct RerankLimits {
  int max_tokens = 0;  // per prompt (the scheduler's max_prompt_tokens)
  int n_ctx = 0;       // for the message
};

// Throws ApiError 400 naming the field on anything it cannot rank: no or an
// empty query, no documents, more than kMaxRerankDocuments (checked before
// any is tokenized), a document that is neither a string nor {"text": str},
// top_n below 1, a prompt longer than the context (documents[i],
// context_length_exceeded) unless truncation was asked for (the document's
// end is cut then; a query too long for any document is still refused).
RerankRequest parse_rerank_request(const nlohmann::json& body, const Tokenizer& tok,
                                   const RerankPrompt& prompt, const RerankLimits& lim,
                                   UnknownFields unknown);

// The response for the documents' scores (one per document, in order).
nlohmann::json rerank_body(const RerankRequest& r, std::span<const float> scores,
                           const std::string& model_id);

// The route. Returns whether to keep the connection.
awaitable<bool> handle_rerank(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                              const std::string& rid, const std::string& client);

}  // namespace tern::server
