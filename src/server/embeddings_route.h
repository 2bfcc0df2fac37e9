#pragma once
// POST /v1/embeddings (OpenAI's shape): each input is a prefill-only
// sequence of the scheduler's batched steps (sched::Request::pooling), its
// final hidden states pooled, then cut to `dimensions` and L2-normalised.
//
//   {"input": "text" | ["text", ...] | [id, ...] | [[id, ...], ...],
//    "model": str, "encoding_format": "float" | "base64", "dimensions": int,
//    "user": str, "truncate": bool, "truncate_prompt_tokens": int}
//   -> {"object": "list", "model": ..., "usage": {"prompt_tokens", "total_tokens"},
//       "data": [{"object": "embedding", "index": i, "embedding": [f, ...] | "base64"}]}
//
// Text is tokenized as llama.cpp's server and llama-embedding do (the
// vocabulary's BOS/EOS added, special tokens parsed); token ids run as given.
// base64 is the vector's little-endian float32 bytes, as OpenAI sends it.
//
// An input longer than the context is refused (400 naming it) unless the
// request asks to cut it: "truncate": true (Hugging Face TEI's field) keeps
// its first max tokens; "truncate_prompt_tokens": k (vLLM's) keeps its last
// k tokens, -1 meaning the most the server takes.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "context.h"
#include "net.h"

namespace tern {
class Tokenizer;
}

namespace tern::server {

// Inputs one request may carry (OpenAI's own limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingsRequest {
  std::vector<std::vector<int32_t>> inputs;  // token ids, one list per input
  bool base64 = false;
  int dimensions = 0;  // 0: every dimension
  std::string model;   // as the client named it ("" when absent)
  int64_t prompt_tokens = 0;
  int truncate_to = 0;    // > 0: inputs cut to this many tokens
  bool keep_end = false;  // the cut keeps the end (truncate_prompt_tokens), else the start
};

struct EmbeddingLimits {
  int max_tokens = 0;  // per input (the scheduler's max_prompt_tokens)
  int n_ctx = 0;       // for the message
  int n_embd = 0;      // the most `dimensions` may ask for
};

// Throws ApiError 400 naming the field (input[i] for an input) on anything
// it cannot embed: no input, an empty one, wrong types, ids outside the
// vocabulary, more than kMaxEmbeddingInputs inputs (checked before any is
// tokenized), an input longer than the context (context_length_exceeded)
// unless truncation was asked for.
EmbeddingsRequest parse_embeddings_request(const nlohmann::json& body, const Tokenizer& tok,
                                           const EmbeddingLimits& lim, UnknownFields unknown);

// The response body for the pooled vectors (one per input, in order):
// each cut to r.dimensions and L2-normalised.
nlohmann::json embeddings_body(const EmbeddingsRequest& r,
                               std::span<const std::vector<float>> pooled,
                               const std::string& model_id);

// RFC 4648 base64 of the floats' little-endian bytes.
std::string base64_floats(std::span<const float> v);

// The route. Returns whether to keep the connection.
awaitable<bool> handle_embeddings(ServerContext& ctx, beast::tcp_stream& stream, const Request& req,
                                  const std::string& rid, const std::string& client);

}  // namespace tern::server
